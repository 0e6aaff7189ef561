package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/config"
	"github.com/rubinofs/rubinofs/daemon"
)

// flagKeys maps the mount flags that have a config key to it. A flag given
// on the command line (c.IsSet) overrides every file; one not given leaves
// the key to the files and the defaults.
var flagKeys = []struct{ flag, key string }{
	{"mode", "guard.mode"},
	{"exempt", "guard.exempt"},
	{"guard-ignored", "guard.guard_ignored"},
	{"unregistered", "guard.unregistered"},
	{"unlink", "guard.unlink"},
	{"errno", "guard.errno"},
	{"session-cgroups", "sessions.cgroup_auto"},
	{"max-live-sessions", "sessions.max_live"},
	{"watch", "cache.watch"},
	{"cache-timeout", "cache.cache_timeout"},
	{"short-timeout", "cache.short_timeout"},
	{"watch-skip", "cache.watch_skip"},
	{"max-watches", "cache.max_watches"},
	{"persist-reads", "cache.persist_reads"},
	{"watch-mode", "cache.watch_mode"},
	{"shared", "cache.shared"},
	{"peer-detect", "cache.peer_detect"},
	{"poll-interval", "cache.poll_interval"},
	{"journal", "journal.enabled"},
	{"journal-ignored", "journal.ignored"},
	{"journal-max-file-size", "journal.max_file_size"},
	{"journal-budget", "journal.budget"},
	{"journal-retention", "journal.retention"},
	{"journal-sync", "journal.sync"},
	{"state-retention", "state.retention"},
	{"compact-max-transcript-bytes", "compact.max_transcript_bytes"},
	{"compact-max-transcripts", "compact.max_transcripts_per_uid"},
	{"agents-shell", "agents.shell"},
}

// configFlag is --config, shared by `mount` and `config show`.
func configFlag() cli.Flag {
	return &cli.StringFlag{Name: "config", Usage: "user config file (TOML; default $XDG_CONFIG_HOME/rubinofs/config.toml, else ~/.config/rubinofs/config.toml)"}
}

// givenFlags returns the config-key flags given on c's command line, typed
// as package config expects.
func givenFlags(c *cli.Context) []config.Flag {
	var out []config.Flag
	for _, fk := range flagKeys {
		if !c.IsSet(fk.flag) {
			continue
		}
		var v any
		switch config.KeyKind(fk.key) {
		case "string":
			v = c.String(fk.flag)
		case "[]string":
			v = append([]string{}, c.StringSlice(fk.flag)...)
		case "bool":
			v = c.Bool(fk.flag)
		case "int":
			v = c.Int(fk.flag)
		case "time.Duration":
			v = c.Duration(fk.flag)
		default:
			panic("flag " + fk.flag + " has no config type")
		}
		out = append(out, config.Flag{Key: fk.key, Name: "--" + fk.flag, Value: v})
	}
	return out
}

// loadConfig loads the effective config for workspace, with the state
// directory's JSON configs and the flags given on c.
func loadConfig(c *cli.Context, workspace, stateDir string) (*config.Config, error) {
	return config.Load(config.Options{
		UserFile:  c.String("config"),
		Workspace: workspace,
		StateDir:  stateDir,
		Flags:     givenFlags(c),
	})
}

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "show the effective configuration and where each value comes from",
		Subcommands: []*cli.Command{{
			Name:      "show",
			Usage:     "print the effective config (flags > WORKSPACE/.rubino.toml > user file > state files > defaults)",
			ArgsUsage: "[WORKSPACE]",
			Description: "Prints every key with a `# from SOURCE` comment. Mount flags given here (--mode, --exempt, ...)\n" +
				"are applied as `rubinofs mount` would apply them. WORKSPACE defaults to the current directory.",
			Flags: append([]cli.Flag{
				configFlag(),
				&cli.BoolFlag{Name: "json", Usage: "print a JSON array of {key, value, from, source}"},
				&cli.StringFlag{Name: "state-dir", Usage: "state directory whose agents.json and compact.json count (default: the mount's)"},
			}, configKeyFlags()...),
			Action: func(c *cli.Context) error {
				if c.NArg() > 1 {
					return cli.Exit("usage: rubinofs config show [--config PATH] [--json] [WORKSPACE]", 2)
				}
				ws := c.Args().First()
				if ws == "" {
					ws = "."
				}
				abs, err := filepath.Abs(ws)
				if err != nil {
					return cli.Exit(err.Error(), 1)
				}
				stateDir := c.String("state-dir")
				if stateDir == "" {
					stateDir = defaultStateDir(abs)
				}
				cfg, err := loadConfig(c, abs, stateDir)
				if err != nil {
					return cli.Exit(err.Error(), 1)
				}
				if c.Bool("json") {
					err = cfg.WriteJSON(os.Stdout)
				} else {
					err = cfg.WriteTOML(os.Stdout)
				}
				if err != nil {
					return cli.Exit(fmt.Sprintf("writing: %v", err), 1)
				}
				return nil
			},
		}},
	}
}

// configKeyFlags are the mount flags that have a config key (flagKeys),
// for `config show` to apply as mount would.
func configKeyFlags() []cli.Flag {
	want := map[string]bool{}
	for _, fk := range flagKeys {
		want[fk.flag] = true
	}
	var out []cli.Flag
	for _, f := range mountFlags() {
		if want[f.Names()[0]] {
			out = append(out, f)
		}
	}
	return out
}

// applyConfig puts the effective config's sections into a daemon.Config.
func applyConfig(cfg *daemon.Config, eff *config.Config) {
	cfg.Guard, cfg.Cache, cfg.Agents = eff.Guard, eff.Cache, eff.Agents
	cfg.Journal, cfg.State = eff.Journal, eff.State
	cfg.Sessions = eff.Sessions
	cc := eff.Compact
	cfg.Compact = &cc
}
