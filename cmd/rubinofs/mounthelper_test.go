package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestMountHelperOptions checks the mapping of mount(8) options onto
// `rubinofs mount` arguments, and the refusals.
func TestMountHelperOptions(t *testing.T) {
	args, ignored, _, err := mountArgsFromOptions(splitMountOptions(
		`rw,mode=warn,allow_other,_netdev,nofail,x-systemd.automount,defaults,comment=x,nowatch,persist_reads,`+
			`exempt="{a,b}/**",exempt=c,cache_timeout=10m,ro,noatime,state_dir=/s`), false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--mode=warn", "--watch=false", "--persist-reads", "--exempt={a,b}/**", "--exempt=c",
		"--cache-timeout=10m", "--state-dir=/s", "-o", "allow_other,ro"}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("args %q\nwant %q", args, want)
	}
	if want := []string{"rw", "_netdev", "nofail", "x-systemd.automount", "defaults", "comment=x", "noatime"}; !reflect.DeepEqual(ignored, want) {
		t.Errorf("ignored %q, want %q", ignored, want)
	}
	for opt, msg := range map[string]string{
		"foo":           `unknown mount option "foo" (known: `,
		"mode":          "needs a value",
		"nomode":        "takes a value",
		"daemon":        `unknown mount option "daemon"`, // the helper daemonises itself
		"in_place":      `unknown mount option "in_place"`,
		"o=allow_other": `unknown mount option "o=allow_other"`,
	} {
		_, _, _, err := mountArgsFromOptions([]string{opt}, false)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("option %q: %v, want %q", opt, err, msg)
		}
	}
	var unk errUnknownOption
	if _, _, _, err := mountArgsFromOptions([]string{"foo"}, false); !errors.As(err, &unk) {
		t.Errorf("foo: %T, want errUnknownOption", err)
	}
	if _, _, unknown, err := mountArgsFromOptions([]string{"foo", "mode=off"}, true); err != nil || len(unknown) != 1 {
		t.Errorf("sloppy: %v %q", err, unknown)
	}
}

// TestMountHelperArgs checks mount(8)'s calling convention.
func TestMountHelperArgs(t *testing.T) {
	hc, err := parseHelperArgs([]string{"/ws", "/mnt", "-n", "-sv", "-o", "mode=warn,ro", "-oallow_other", "-t", "fuse.rubinofs"})
	if err != nil {
		t.Fatal(err)
	}
	if hc.source != "/ws" || hc.target != "/mnt" || !hc.sloppy || !hc.verbose || hc.fake ||
		!reflect.DeepEqual(hc.options, []string{"mode=warn", "ro", "allow_other"}) {
		t.Errorf("parsed %+v", hc)
	}
	for _, bad := range [][]string{{"/ws"}, {"/ws", "/mnt", "/x"}, {"/ws", "/mnt", "-o"}, {"/ws", "/mnt", "-t", "ext4"},
		{"/ws", "/mnt", "-N", "/proc/1/ns/mnt"}, {"/ws", "/mnt", "-q"}} {
		if _, err := parseHelperArgs(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	for argv, want := range map[string]bool{
		"/sbin/mount.fuse.rubinofs /a /b": true, "mount.rubinofs /a /b": true,
		"rubinofs /a /b -o x": true, "rubinofs mount /a /b": false, "rubinofs status": false, "rubinofs": false,
	} {
		if got := isMountHelper(strings.Fields(argv)); got != want {
			t.Errorf("isMountHelper(%s) = %v", argv, got)
		}
	}
}
