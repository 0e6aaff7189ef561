package main

import (
	"strings"
	"testing"
)

func TestWatchModeArgs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"rubinofs mount --watch=poll ws mnt", "rubinofs mount --watch=true --watch-mode=poll ws mnt"},
		{"rubinofs mount ws mnt --watch=inotify", "rubinofs mount ws mnt --watch=true --watch-mode=inotify"},
		{"rubinofs mount ws mnt --watch=auto", "rubinofs mount ws mnt --watch=true --watch-mode=auto"},
		{"rubinofs mount ws mnt --watch=off", "rubinofs mount ws mnt --watch=false"},
		{"rubinofs mount ws mnt --watch=false", "rubinofs mount ws mnt --watch=false"},
		{"rubinofs mount ws mnt --watch", "rubinofs mount ws mnt --watch"},
		{"rubinofs mount ws mnt -- --watch=poll", "rubinofs mount ws mnt -- --watch=poll"},
		{"rubinofs run sh --watch=poll", "rubinofs run sh --watch=poll"},
	} {
		if got := strings.Join(watchModeArgs(strings.Fields(tc.in)), " "); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.in, got, tc.want)
		}
	}
}
