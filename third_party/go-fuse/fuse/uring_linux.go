// Copyright 2026 the Go-FUSE Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// FUSE over io_uring (Linux 6.14 and later, protocol 7.42): added in
// rubinofs' copy of go-fuse. Not in upstream go-fuse v2.12.1.

package fuse

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's FUSE-over-io_uring interface (include/uapi/linux/fuse.h).
const (
	uringCmdRegister       = 1 // FUSE_IO_URING_CMD_REGISTER
	uringCmdCommitAndFetch = 2 // FUSE_IO_URING_CMD_COMMIT_AND_FETCH

	// struct fuse_uring_req_header: in_out[128], op_in[128], then
	// struct fuse_uring_ent_in_out {flags, commit_id u64; payload_sz u32; ...}.
	uringOpInOff      = 128
	uringEntInOutOff  = 256
	uringCommitIDOff  = uringEntInOutOff + 8
	uringPayloadSzOff = uringEntInOutOff + 16
	uringHeaderSize   = 4096 // one page; the kernel needs 288 bytes
	uringIovOff       = 2048 // where the REGISTER iovecs are kept

	sysIOURingSetup = 425
	sysIOURingEnter = 426

	ioringSetupSQE128 = 1 << 10
	ioringSetupCQSize = 1 << 3
	ioringEnterGetEv  = 1
	ioringOpURingCmd  = 46
	ioringOffSQRing   = 0
	ioringOffCQRing   = 0x8000000
	ioringOffSQEs     = 0x10000000
	ioringSQESize     = 128
	ioringCQESize     = 16
)

// uringThreadsPerQueue is the number of threads serving each CPU's queue
// unless MountOptions.IOURingThreadsPerQueue says otherwise. Each thread
// owns one ring entry and handles its request inline, so this is how many
// requests from one CPU can be in a handler at once.
const uringThreadsPerQueue = 4

// URingNegotiated reports whether the kernel accepted FUSE over io_uring
// for this mount (CAP_OVER_IO_URING in the INIT reply).
func (ms *Server) URingNegotiated() bool {
	return ms.negotiatedFlags&CAP_OVER_IO_URING != 0
}

// URingServed returns how many requests the ring threads have answered.
func (ms *Server) URingServed() int64 {
	return ms.uringServed.Load()
}

// startURing registers the ring entries of every possible CPU's queue
// and starts their threads. It returns once all are registered, or the
// first error (the mount then stays on /dev/fuse: the kernel uses the ring
// only once every queue has an entry).
func (ms *Server) startURing() error {
	if !ms.URingNegotiated() {
		return nil
	}
	ncpu, err := possibleCPUs()
	if err != nil {
		return err
	}
	per := ms.opts.IOURingThreadsPerQueue
	if per <= 0 {
		per = uringThreadsPerQueue
	}

	payload := max(ms.opts.MaxWrite, _FUSE_MIN_READ_BUFFER, 256<<10)
	payload = (payload + syscall.Getpagesize() - 1) &^ (syscall.Getpagesize() - 1)
	for qid := 0; qid < ncpu; qid++ {
		q := &uringQueue{qid: qid, payload: payload, total: per}
		for i := 0; i < per; i++ {
			if err := ms.startURingThread(q); err != nil {
				return fmt.Errorf("io_uring queue %d: %w", qid, err)
			}
		}
	}
	return nil
}

// uringMaxThreadsPerQueue bounds a queue's threads, grown one at a time
// while all of them are in a handler.
const uringMaxThreadsPerQueue = 64

// uringQueue is the state the threads of one CPU's queue share.
type uringQueue struct {
	qid, payload int
	mu           sync.Mutex
	total, busy  int // threads started, and those in a handler
}

// startURingThread starts a thread with an entry of q and returns once
// the entry is registered, or the registration's error.
func (ms *Server) startURingThread(q *uringQueue) error {
	ready := make(chan error, 1)
	ms.fuseFD.loops.Add(1)
	go ms.uringThread(q, ready)
	return <-ready
}

// enter counts a thread of q into a handler. When that leaves one free
// thread or none, another is started and registered before the handler
// runs (up to uringMaxThreadsPerQueue), as go-fuse starts another reader
// of /dev/fuse: a handler that blocks (a blocking read of a control file)
// must not leave its CPU's queue without a free entry, or every caller on
// that CPU would wait for it. One entry is kept spare because the kernel
// hands a request that found no free entry only to an entry that commits
// a reply, never to one registered after it arrived.
func (q *uringQueue) enter(ms *Server) {
	q.mu.Lock()
	q.busy++
	grow := q.busy >= q.total-1 && q.total < uringMaxThreadsPerQueue
	if grow {
		q.total++
	}
	q.mu.Unlock()
	if grow {
		if err := ms.startURingThread(q); err != nil {
			ms.opts.Logger.Printf("io_uring queue %d: another thread: %v", q.qid, err)
			q.mu.Lock()
			q.total--
			q.mu.Unlock()
		}
	}
}

// leave counts a thread of q out of its handler.
func (q *uringQueue) leave() {
	q.mu.Lock()
	q.busy--
	q.mu.Unlock()
}

// possibleCPUs is the kernel's num_possible_cpus(): the number of queues.
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	last := s
	if i := strings.LastIndexAny(s, "-,"); i >= 0 {
		last = s[i+1:]
	}
	n, err := strconv.Atoi(last)
	if err != nil {
		return 0, fmt.Errorf("parse %q: %v", s, err)
	}
	return n + 1, nil
}

// uringThread serves one ring entry of queue qid on a locked OS thread
// pinned to CPU qid where the affinity mask allows: the kernel queues a
// request on the queue of the CPU its caller runs on, and a reply from the
// same CPU costs no cross-CPU wakeup.
func (ms *Server) uringThread(q *uringQueue, ready chan<- error) {
	defer ms.fuseFD.loops.Done()
	qid, payloadSize := q.qid, q.payload
	runtime.LockOSThread()
	// The thread keeps its affinity: let it exit with the goroutine.
	var set unix.CPUSet
	set.Set(qid)
	unix.SchedSetaffinity(0, &set) // an affinity mask without qid refuses it: unpinned then

	r, err := newURing(4)
	if err != nil {
		ready <- err
		return
	}
	defer r.close()
	hdr, err := unix.Mmap(-1, 0, uringHeaderSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		ready <- err
		return
	}
	defer unix.Munmap(hdr)
	payload, err := unix.Mmap(-1, 0, payloadSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		ready <- err
		return
	}
	defer unix.Munmap(payload)
	// The REGISTER command's two iovecs (header, payload) live in the
	// header's page, past the kernel's 288 bytes: memory the Go runtime
	// never moves, as the SQE carries only its address.
	iov := (*[2]unix.Iovec)(unsafe.Pointer(&hdr[uringIovOff]))
	iov[0] = unix.Iovec{Base: &hdr[0]}
	iov[0].SetLen(uringIovOff)
	iov[1] = unix.Iovec{Base: &payload[0]}
	iov[1].SetLen(len(payload))

	var fd int
	if err := ms.fuseFD.withFD(func(f int) { fd = f }); err != nil {
		ready <- err
		return
	}
	// queue puts one FUSE_IO_URING command for this thread's entry on the
	// submission queue; the next enter submits it.
	queue := func(cmd uint32, commitID uint64) {
		s := r.sqe()
		s[0] = ioringOpURingCmd
		*(*int32)(unsafe.Pointer(&s[4])) = int32(fd)
		*(*uint32)(unsafe.Pointer(&s[8])) = cmd
		if cmd == uringCmdRegister {
			*(*uint64)(unsafe.Pointer(&s[16])) = uint64(uintptr(unsafe.Pointer(&iov[0])))
			*(*uint32)(unsafe.Pointer(&s[24])) = 2
		}
		*(*uint64)(unsafe.Pointer(&s[56])) = commitID
		*(*uint16)(unsafe.Pointer(&s[64])) = uint16(qid)
	}
	queue(uringCmdRegister, 0)
	err = r.enter(0)
	if err == nil {
		// A refused registration completes at once; an accepted one
		// completes only when a request arrives, which may be right away:
		// that completion stays for the loop below.
		if res, ok := r.peek(); ok && res < 0 {
			r.reap()
			err = syscall.Errno(-res)
		}
	}
	if err != nil {
		ready <- fmt.Errorf("register: %w", err)
		return
	}
	ready <- nil

	var commitID uint64
	last := uint32(uringCmdRegister)
	failures := 0
	for {
		if err := r.enter(1); err != nil {
			ms.opts.Logger.Printf("io_uring queue %d: io_uring_enter: %v", qid, err)
			return
		}
		res, ok := r.reap()
		if !ok {
			continue
		}
		switch {
		case res == 0:
			failures = 0
		case res == -int32(syscall.ENOTCONN) || res == -int32(syscall.ENODEV):
			return // the connection is gone: unmounted or aborted
		case res == -int32(syscall.EAGAIN) || res == -int32(syscall.EINTR):
			queue(last, commitID) // not taken: send it again
			continue
		default:
			// The kernel refused the command. Register the entry
			// afresh, so that the CPU's queue keeps its thread.
			failures++
			ms.opts.Logger.Printf("io_uring queue %d: command %d failed: %v", qid, last, syscall.Errno(-res))
			if failures > 3 {
				return
			}
			last, commitID = uringCmdRegister, 0
			queue(last, 0)
			continue
		}
		commitID = *(*uint64)(unsafe.Pointer(&hdr[uringCommitIDOff]))
		psz := int(*(*uint32)(unsafe.Pointer(&hdr[uringPayloadSzOff])))
		q.enter(ms)
		ms.uringServe(hdr, payload[:min(psz, len(payload))])
		q.leave()
		ms.uringServed.Add(1)
		last = uringCmdCommitAndFetch
		queue(last, commitID)
	}
}

// uringServe handles the request in hdr (header and op header) and payload
// and leaves the reply there: the out header in hdr, the reply's data in
// payload, its length in the entry's payload_sz.
func (ms *Server) uringServe(hdr, payload []byte) {
	r := ms.fuseFD
	in := (*InHeader)(unsafe.Pointer(&hdr[0]))
	opSize := 0
	if h := getHandler(in.Opcode); h != nil {
		opSize = int(h.InputSize)
		switch in.Opcode {
		case _OP_RENAME:
			opSize = renameInSize(&ms.kernelSettings)
		case _OP_SETXATTR:
			opSize = setXAttrInSize(ms.negotiatedFlags)
		}
	}
	// Go-FUSE's input structs begin with the InHeader; the kernel puts
	// only the op's own header in op_in.
	hsz := int(unsafe.Sizeof(InHeader{}))
	opSize = min(max(opSize-hsz, 0), uringEntInOutOff-uringOpInOff)
	n := hsz + opSize + len(payload)

	req := r.reqPool.Get().(*requestAlloc)
	dest := r.readPool.Get().([]byte)
	r.reqMu.Lock()
	r.inflightRequestBytes += r.requestBytes()
	r.reqMu.Unlock()
	if n > len(dest) {
		dest = make([]byte, n)
	}
	copy(dest, hdr[:hsz])
	copy(dest[hsz:], hdr[uringOpInOff:uringOpInOff+opSize])
	copy(dest[hsz+opSize:], payload)
	// The input header's length is that of the whole request, as read(2)
	// would have returned it.
	(*InHeader)(unsafe.Pointer(&dest[0])).Length = uint32(n)
	gobbled := req.setInput(dest[:n])
	if !gobbled {
		r.reqMu.Lock()
		r.putReadBuf(dest)
		r.reqMu.Unlock()
	}
	unique := in.Unique
	replied := false
	ms.handleRequestWith(req, func(req *request) Status {
		replied = true
		return uringReply(req, hdr, payload[:cap(payload)])
	})
	if !replied {
		// go-fuse suppressed the reply (a request interrupted after the
		// connection died): the entry is committed all the same, with an
		// error, or the kernel would wait on it.
		o := (*OutHeader)(unsafe.Pointer(&hdr[0]))
		*o = OutHeader{Length: uint32(sizeOfOutHeader), Status: -int32(syscall.EINTR), Unique: unique}
		*(*uint32)(unsafe.Pointer(&hdr[uringPayloadSzOff])) = 0
	}
}

// uringReply copies the reply of req into the ring entry.
func uringReply(req *request, hdr, payload []byte) Status {
	n := 0
	put := func(b []byte) Status {
		if n+len(b) > len(payload) {
			return ERANGE
		}
		n += copy(payload[n:], b)
		return OK
	}
	st := put(req.outDataBuf)
	if req.outPayloadSize() > 0 || req.readResult != nil {
		if req.readResult != nil {
			if ws, ok := req.readResult.(withSlice); ok {
				slices, s := ws.Slices()
				st = s
				for _, b := range slices {
					if !st.Ok() {
						break
					}
					st = put(b)
				}
			} else {
				var data []byte
				data, req.status = req.readResult.Bytes(payload[n:])
				if req.status.Ok() {
					st = put(data)
				}
			}
			req.readResult.Done()
			req.readResult = nil
			if !req.status.Ok() {
				n = 0
			}
		} else if st.Ok() {
			st = put(req.outPayload)
		}
	}
	if !st.Ok() {
		req.status = st
		n = 0
	}
	if req.status > OK {
		n = 0
	}
	o := req.outHeader()
	o.Status = int32(-req.status)
	o.Length = uint32(int(sizeOfOutHeader) + n)
	copy(hdr[:sizeOfOutHeader], req.outHeaderBuf)
	*(*uint32)(unsafe.Pointer(&hdr[uringPayloadSzOff])) = uint32(n)
	return OK
}

// uring is one io_uring with 128-byte SQEs, used by the one thread that
// made it.
type uring struct {
	fd           int
	sqMem, cqMem []byte
	sqes         []byte
	sqTail       *uint32
	sqMask       uint32
	sqArray      unsafe.Pointer
	cqHead       *uint32
	cqTail       *uint32
	cqMask       uint32
	cqes         unsafe.Pointer
	pending      uint32
}

type uringParams struct {
	SqEntries, CqEntries, Flags, SqThreadCPU, SqThreadIdle, Features, WqFd uint32
	Resv                                                                   [3]uint32
	SqHead, SqTail, SqRingMask, SqRingEntries, SqFlags, SqDropped, SqArray uint32
	SqResv1                                                                uint32
	SqUserAddr                                                             uint64
	CqHead, CqTail, CqRingMask, CqRingEntries, CqOverflow, CqCqes, CqFlags uint32
	CqResv1                                                                uint32
	CqUserAddr                                                             uint64
}

func newURing(entries uint32) (*uring, error) {
	p := uringParams{Flags: ioringSetupSQE128 | ioringSetupCQSize, CqEntries: entries * 2}
	fd, _, errno := syscall.Syscall(sysIOURingSetup, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &uring{fd: int(fd)}
	var err error
	prot, flags := unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE
	if r.sqMem, err = unix.Mmap(r.fd, ioringOffSQRing, int(p.SqArray+p.SqEntries*4), prot, flags); err != nil {
		r.close()
		return nil, err
	}
	if r.cqMem, err = unix.Mmap(r.fd, ioringOffCQRing, int(p.CqCqes+p.CqEntries*ioringCQESize), prot, flags); err != nil {
		r.close()
		return nil, err
	}
	if r.sqes, err = unix.Mmap(r.fd, ioringOffSQEs, int(p.SqEntries)*ioringSQESize, prot, flags); err != nil {
		r.close()
		return nil, err
	}
	sq, cq := unsafe.Pointer(&r.sqMem[0]), unsafe.Pointer(&r.cqMem[0])
	r.sqTail = (*uint32)(unsafe.Add(sq, p.SqTail))
	r.sqMask = *(*uint32)(unsafe.Add(sq, p.SqRingMask))
	r.sqArray = unsafe.Add(sq, p.SqArray)
	r.cqHead = (*uint32)(unsafe.Add(cq, p.CqHead))
	r.cqTail = (*uint32)(unsafe.Add(cq, p.CqTail))
	r.cqMask = *(*uint32)(unsafe.Add(cq, p.CqRingMask))
	r.cqes = unsafe.Add(cq, p.CqCqes)
	return r, nil
}

func (r *uring) close() {
	for _, m := range [][]byte{r.sqes, r.cqMem, r.sqMem} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	syscall.Close(r.fd)
}

// sqe returns a zeroed submission slot, queued for the next enter.
func (r *uring) sqe() []byte {
	tail := atomic.LoadUint32(r.sqTail)
	idx := tail & r.sqMask
	s := r.sqes[idx*ioringSQESize : (idx+1)*ioringSQESize]
	clear(s)
	*(*uint32)(unsafe.Add(r.sqArray, idx*4)) = idx
	atomic.StoreUint32(r.sqTail, tail+1)
	r.pending++
	return s
}

// enter submits what is queued and waits for wait completions.
func (r *uring) enter(wait uint32) error {
	for {
		n, _, errno := syscall.Syscall6(sysIOURingEnter, uintptr(r.fd), uintptr(r.pending), uintptr(wait), ioringEnterGetEv, 0, 0)
		if errno == 0 || errno == syscall.EINTR {
			r.pending -= min(r.pending, uint32(n))
			if errno == 0 {
				return nil
			}
			continue
		}
		return errno
	}
}

// peek returns the result of the oldest completion, if there is one,
// and leaves it in the queue.
func (r *uring) peek() (res int32, ok bool) {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) {
		return 0, false
	}
	c := unsafe.Add(r.cqes, (head&r.cqMask)*ioringCQESize)
	return *(*int32)(unsafe.Add(c, 8)), true
}

// reap takes the oldest completion, if there is one.
func (r *uring) reap() (res int32, ok bool) {
	if res, ok = r.peek(); ok {
		atomic.AddUint32(r.cqHead, 1)
	}
	return res, ok
}
