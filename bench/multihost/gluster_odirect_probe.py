#!/usr/bin/env python3
# Probe of what an O_DIRECT read on one GlusterFS client sees right after
# another client rewrote the file (docs/multihost.md#glusterfs, the table
# "Where a stale O_DIRECT read came from"). Not through rubinofs.
#
# Usage (two clients of one volume mounted at C1 and C2; set the volume
# options to compare with `gluster volume set`, then remount both):
#   python3 bench/multihost/gluster_odirect_probe.py C1 C2 [ROUNDS]
#   FORCE=1 ...   also statx(AT_STATX_FORCE_SYNC) the descriptor first
# Prints, per case (the file shrank, was truncated, grew, grew from
# empty), how many reads returned the new content ('ok') and what the
# others returned.
import ctypes, mmap, os, sys

c1, c2 = sys.argv[1], sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 30
libc = ctypes.CDLL(None, use_errno=True)
FORCE = os.environ.get('FORCE') == '1'
def fstatx_size(fd):
    buf = ctypes.create_string_buffer(256)
    r = libc.statx(fd, b"", 0x1000 | 0x2000, 0x7ff, buf)  # AT_EMPTY_PATH|AT_STATX_FORCE_SYNC
    if r != 0: raise OSError(ctypes.get_errno(), 'statx')
    return int.from_bytes(buf.raw[40:48], 'little')
def dread(p, fill=b'X'):
    fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
    if FORCE: fstatx_size(fd)
    buf = mmap.mmap(-1, 8192)
    buf.write(fill * 8192)
    n = os.preadv(fd, [buf], 0)
    st = os.fstat(fd).st_size
    os.close(fd)
    return n, bytes(buf[:max(n, 0)]), st, bytes(buf[:40])
def write(p, data, trunc_only=False):
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    if not trunc_only:
        os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
cases = {'shrink': (b'0123456789abcdefghij\n', b'short\n', False),
         'trunc': (b'5\n', b'', True),
         'grow': (b'5\n', b'123456789\n', False),
         'grow_from_empty': (b'', b'6\n', False)}
for name, (old, new, tr) in cases.items():
    stats = {}
    p1, p2 = os.path.join(c1, 'f'), os.path.join(c2, 'f')
    for i in range(N):
        write(p1, old)
        # client 2 sees old: stat + read
        for _ in range(50):
            n, b, st, raw = dread(p2)
            if b == old: break
        os.stat(p2)
        write(p1, new, tr)
        n, b, st, raw = dread(p2)
        key = 'ok' if b == new else 'n=%d got=%r size=%d' % (n, b, st)
        stats[key] = stats.get(key, 0) + 1
    print(name, stats)
