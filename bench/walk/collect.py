# bench/walk/collect.py: run inside gdb (gdb -batch -p DAEMON -x collect.py),
# driven by bench/walk/walk.sh. It puts a breakpoint on the entry of every
# function of the module (WALK_FUNCS: "ADDR NAME" lines from `go tool nm`)
# and on go-fuse's per-opcode handlers (fuse.doUnlink, fuse.doLookup, ...:
# the request markers), each a Python breakpoint that records (goroutine id,
# function) and lets the thread run on (stop() returns False). Then it
# releases the workload (writes a line to the fifo WALK_GO) and lets the
# daemon run until it receives SIGUSR1 (which the workload sends once its
# `rm` returned; gdb keeps the signal from the daemon). It deletes every
# breakpoint, detaches, and writes the events as JSON to WALK_OUT.
#
# The goroutine id is read from the g register (R14 on amd64: Go's
# register ABI keeps the current g there in every Go function), so calls
# are attributed to the goroutine, not the OS thread a goroutine happens
# to run on; runtime.g.parentGoid names the goroutine that started each.
import json
import os
import time

import gdb

funcs_file = os.environ["WALK_FUNCS"]
markers_file = os.environ["WALK_MARKERS"]
go_fifo = os.environ["WALK_GO"]
out_file = os.environ["WALK_OUT"]

for cmd in (
    "set pagination off",
    "set confirm off",
    "set breakpoint pending off",
    # Keep the breakpoints in the text while the daemon runs: otherwise gdb
    # removes and re-inserts thousands of them at every hit.
    "set breakpoint always-inserted on",
    "handle SIGURG nostop noprint pass",
    "handle SIGPIPE nostop noprint pass",
    "handle SIGCHLD nostop noprint pass",
    "handle SIGPROF nostop noprint pass",
    "handle SIGWINCH nostop noprint pass",
    "handle SIGUSR1 stop print nopass",
):
    gdb.execute(cmd, to_string=True)

inferior = gdb.selected_inferior()
goid_off = parent_off = None
for f in gdb.lookup_type("runtime.g").fields():
    if f.name == "goid":
        goid_off = f.bitpos // 8
    elif f.name == "parentGoid":
        parent_off = f.bitpos // 8
if goid_off is None:
    raise gdb.GdbError("no runtime.g.goid in the binary's DWARF")
parents = {}  # goid -> the goid of the goroutine that started it

events = []  # [goid, kind, index]: kind "f" = module function, "m" = marker
names = []   # index -> (kind, name, file)
probes = []


class Probe(gdb.Breakpoint):
    def __init__(self, addr, kind, idx):
        super().__init__("*0x%x" % addr, internal=True)
        self.kind = kind
        self.idx = idx

    def stop(self):
        g = int(gdb.newest_frame().read_register("r14"))
        goid = int.from_bytes(bytes(inferior.read_memory(g + goid_off, 8)), "little")
        if parent_off is not None and goid not in parents:
            parents[goid] = int.from_bytes(bytes(inferior.read_memory(g + parent_off, 8)), "little")
        events.append((goid, self.kind, self.idx))
        return False


def load(path, kind):
    with open(path) as fh:
        for line in fh:
            addr, name = line.split(None, 1)
            addr = int(addr, 16)
            sal = gdb.find_pc_line(addr)
            fname = sal.symtab.filename if sal.symtab is not None else "?"
            idx = len(names)
            names.append((kind, name.strip(), fname))
            probes.append(Probe(addr, kind, idx))


t0 = time.time()
load(funcs_file, "f")
load(markers_file, "m")
t_armed = time.time()

got = {"usr1": False}


def on_stop(ev):
    if isinstance(ev, gdb.SignalEvent) and ev.stop_signal == "SIGUSR1":
        got["usr1"] = True


gdb.events.stop.connect(on_stop)

# Release the workload: it blocks reading this fifo; its rm then runs
# against the (still stopped) daemon and is served once we continue.
with open(go_fifo, "w") as fh:
    fh.write("go\n")

error = None
while not got["usr1"]:
    try:
        gdb.execute("continue", to_string=True)
    except gdb.error as e:  # the daemon died, or gdb lost it
        error = str(e)
        break
t_done = time.time()

# Internal breakpoints are not in gdb.breakpoints(): delete ours by hand.
for bp in probes:
    bp.delete()
try:
    gdb.execute("detach", to_string=True)
except gdb.error:
    pass

with open(out_file, "w") as fh:
    json.dump({
        "names": names,
        "events": events,
        "parents": {str(k): v for k, v in parents.items()},
        "error": error,
        "probes": len(names),
        "arm_seconds": round(t_armed - t0, 2),
        "window_seconds": round(t_done - t_armed, 2),
    }, fh)
