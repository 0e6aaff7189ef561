package branch

// The overlay's lower layers read as one tree, as the kernel merges them
// (docs/DESIGN.md#branch-diff): a branch made from a checkpoint lies over
// its base layer and the workspace (docs/DESIGN.md#branch-from).

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// lowerView is a stack of lower layers, layers[0] on top. Every layer but
// the last is an overlay layer (whiteouts and opaque directories hide what
// is below them); the last, the workspace, is read as a plain tree. With
// one layer it is that directory. Only reads; safe for concurrent use.
type lowerView struct {
	layers []string
}

// bottom reports whether layer is the last, plain one.
func (v lowerView) bottom(layer string) bool { return layer == v.layers[len(v.layers)-1] }

// child looks up the relative path p, whose parent directory is a merged
// directory made of the layers parent (top first; nil: the parent is
// absent from every lower layer, so p is too). It returns p's entry (nil
// when absent: not found, or hidden by a whiteout), its absolute path in
// the layer that gives it, and, when it is a directory, the layers it is
// merged from: the first layer's, then each lower one's directory until an
// opaque one, a whiteout or a non-directory (which it hides). An
// overlayfs feature the view cannot read (redirect, metacopy) is an
// error wrapping ErrUnsupported.
func (v lowerView) child(parent []string, p string) (fs.FileInfo, string, []string, error) {
	var (
		top    fs.FileInfo
		topAbs string
		sub    []string
	)
	for _, l := range parent {
		abs := filepath.Join(l, p)
		fi, err := os.Lstat(abs)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue
		}
		if err != nil {
			return nil, "", nil, err
		}
		var a overlayAttrs
		if !v.bottom(l) && (fi.IsDir() || fi.Mode().IsRegular()) {
			if a, err = xattrs(abs); err != nil {
				return nil, "", nil, err
			}
		}
		if !v.bottom(l) && isWhiteout(fi, a) {
			break
		}
		if top == nil {
			top, topAbs = fi, abs
		}
		if !fi.IsDir() || !top.IsDir() {
			break
		}
		sub = append(sub, l)
		if a.opaque {
			break
		}
	}
	if top == nil || !top.IsDir() {
		sub = nil
	}
	return top, topAbs, sub, nil
}

// lookup resolves the relative path p ("" or ".": the root) from the
// root, one name at a time (child): its entry (nil when absent) and its
// absolute path in the layer that gives it.
func (v lowerView) lookup(p string) (fs.FileInfo, string, error) {
	p = filepath.Clean(p)
	if p == "." {
		fi, err := os.Lstat(v.layers[0])
		return fi, v.layers[0], err
	}
	layers := v.layers
	var (
		fi  fs.FileInfo
		abs string
		err error
		cur string
	)
	for _, name := range splitPath(p) {
		cur = filepath.Join(cur, name)
		if fi, abs, layers, err = v.child(layers, cur); err != nil || fi == nil {
			return nil, "", err
		}
	}
	return fi, abs, nil
}

// splitPath splits a clean relative path into its names.
func splitPath(p string) []string {
	var out []string
	for p != "." && p != "" {
		d, f := filepath.Split(p)
		out = append(out, f)
		p = filepath.Clean(d)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// names lists the merged directory rel made of layers (top first), as a
// readdir of the overlay would: each name once, a whiteout and what it
// hides left out, sorted.
func (v lowerView) names(layers []string, rel string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, l := range layers {
		dir := filepath.Join(l, rel)
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if seen[e.Name()] {
				continue
			}
			seen[e.Name()] = true
			if !v.bottom(l) && (e.Type()&fs.ModeCharDevice != 0 || e.Type().IsRegular()) {
				abs := filepath.Join(dir, e.Name())
				fi, err := os.Lstat(abs)
				if err != nil {
					return nil, err
				}
				var a overlayAttrs
				if fi.Mode().IsRegular() && fi.Size() == 0 {
					if a, err = xattrs(abs); err != nil {
						return nil, err
					}
				}
				if isWhiteout(fi, a) {
					continue
				}
			}
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}
