// Copyright 2026 the Go-FUSE Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build !linux

package fuse

// startURing does nothing: FUSE over io_uring is Linux only.
func (ms *Server) startURing() error { return nil }

// URingNegotiated reports false: FUSE over io_uring is Linux only.
func (ms *Server) URingNegotiated() bool { return false }

// URingServed returns 0: FUSE over io_uring is Linux only.
func (ms *Server) URingServed() int64 { return 0 }
