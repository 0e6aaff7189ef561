package tasks

import (
	"fmt"
	"strconv"
)

// Caps are the three nesting caps, all enforced in Reserve
// (docs/DESIGN.md#task-caps). Zero fields mean the defaults (DefaultCaps).
type Caps struct {
	// MaxDepth: a new task whose depth (0 for a top-level task, owner's
	// depth + 1 otherwise) is >= MaxDepth is refused ("depth"). Default 2.
	MaxDepth int `json:"max_depth,omitempty"`
	// MaxChildrenPerNode: an owner (a task; for top-level tasks a
	// non-task session, or a uid outside every session) with this many
	// live children is refused ("per_owner"). Default 3.
	MaxChildrenPerNode int `json:"max_children_per_node,omitempty"`
	// MaxConcurrentTotal: with this many live tasks in the whole registry a
	// spawn is refused ("global"). Default 8.
	MaxConcurrentTotal int `json:"max_concurrent_total,omitempty"`
}

// DefaultCaps are the built-in caps, which agents.json may change: depth 2
// (top-level tasks and one level of children), 3 live children per owner,
// 8 live tasks in total.
func DefaultCaps() Caps { return Caps{MaxDepth: 2, MaxChildrenPerNode: 3, MaxConcurrentTotal: 8} }

// withDefaults fills zero fields from DefaultCaps.
func (c Caps) withDefaults() Caps {
	d := DefaultCaps()
	if c.MaxDepth <= 0 {
		c.MaxDepth = d.MaxDepth
	}
	if c.MaxChildrenPerNode <= 0 {
		c.MaxChildrenPerNode = d.MaxChildrenPerNode
	}
	if c.MaxConcurrentTotal <= 0 {
		c.MaxConcurrentTotal = d.MaxConcurrentTotal
	}
	return c
}

// Refusal reasons recorded by Reserve, one per cap, in the order Reserve
// checks them.
const (
	RefusedDepth    = "depth"
	RefusedPerOwner = "per_owner"
	RefusedGlobal   = "global"
)

// CapError is Reserve's refusal: Reason is RefusedDepth, RefusedPerOwner or
// RefusedGlobal. Control-file callers see EAGAIN and the message, which
// starts with the reason.
type CapError struct {
	Reason string // RefusedDepth, RefusedPerOwner or RefusedGlobal
	Msg    string // the readable detail (counts and the cap)
}

// Error implements error.
func (e *CapError) Error() string { return e.Reason + ": " + e.Msg }

// capKeyOf names what the per_owner cap counts a top-level task of req
// under: "uid N" for a caller outside every session (ReserveRequest.ByUid:
// every caller of one uid shares its default session, and no uid shares
// another's), else "session NAME". A task-spawned child is counted under
// its owner task instead (docs/DESIGN.md#task-caps).
func capKeyOf(req ReserveRequest) string {
	if req.ByUid {
		return "uid " + strconv.FormatUint(uint64(req.OwnerUid), 10)
	}
	return "session " + req.OwnerSession
}

// refusalLocked is Reserve's cap check for a new task of depth under
// ownerTask (or, for a top-level task, the owner capKey names): nil when
// it fits. Only live tasks count. r.mu is held.
func (r *Registry) refusalLocked(ownerTask, capKey string, depth int) *CapError {
	if depth >= r.caps.MaxDepth {
		return &CapError{RefusedDepth, fmt.Sprintf("a task at depth %d is past max_depth %d", depth, r.caps.MaxDepth)}
	}
	kids, total := 0, 0
	for _, e := range r.entries {
		if !e.Status.Live() {
			continue
		}
		total++
		if e.OwnerTask == ownerTask && (ownerTask != "" || e.capKey == capKey) {
			kids++
		}
	}
	if kids >= r.caps.MaxChildrenPerNode {
		who := capKey
		if ownerTask != "" {
			who = "task " + ownerTask
		}
		return &CapError{RefusedPerOwner, fmt.Sprintf("%s already has %d live children (max_children_per_node %d)", who, kids, r.caps.MaxChildrenPerNode)}
	}
	if total >= r.caps.MaxConcurrentTotal {
		return &CapError{RefusedGlobal, fmt.Sprintf("%d tasks are live (max_concurrent_total %d)", total, r.caps.MaxConcurrentTotal)}
	}
	return nil
}

// LastRefusalReason is why the most recent Reserve was refused (depth,
// per_owner or global), or "" when it succeeded.
func (r *Registry) LastRefusalReason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refusal
}
