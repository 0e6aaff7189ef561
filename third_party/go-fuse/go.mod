module github.com/hanwen/go-fuse/v2

go 1.21

require golang.org/x/sys v0.49.0
