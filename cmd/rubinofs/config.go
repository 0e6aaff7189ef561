package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/config"
	"github.com/rubinofs/rubinofs/daemon"
)

// keyFlags are the mount flags that set a config key, made from the
// options table (config.Keys: name, type, default and help are the key's
// row; docs/DESIGN.md#options-table), in its order. A flag given on the
// command line (c.IsSet) overrides every file; one not given leaves the
// key to the files and the defaults. Shared by `mount` and `config show`.
func keyFlags() []cli.Flag {
	var out []cli.Flag
	for _, o := range config.Keys() {
		if o.Flag == "" {
			continue
		}
		var f cli.Flag
		switch o.Kind() {
		case "string":
			f = &cli.StringFlag{Name: o.Flag, Value: o.Default.(string), Usage: o.Usage}
		case "[]string": // a list flag shows no default: each --FLAG adds one
			f = &cli.StringSliceFlag{Name: o.Flag, Usage: o.Usage}
		case "bool":
			f = &cli.BoolFlag{Name: o.Flag, Value: o.Default.(bool), Usage: o.Usage}
		case "int":
			f = &cli.IntFlag{Name: o.Flag, Value: o.Default.(int), Usage: o.Usage}
		case "time.Duration":
			f = &cli.DurationFlag{Name: o.Flag, Value: o.Default.(time.Duration), Usage: o.Usage}
		default:
			panic("config key " + o.Key + " of kind " + o.Kind() + " has a flag")
		}
		out = append(out, f)
	}
	return out
}

// configFlag is --config, shared by `mount` and `config show`.
func configFlag() cli.Flag {
	return &cli.StringFlag{Name: "config", Usage: "user config file (TOML; default $XDG_CONFIG_HOME/rubinofs/config.toml, else ~/.config/rubinofs/config.toml)"}
}

// givenFlags returns the config-key flags given on c's command line, typed
// as package config expects.
func givenFlags(c *cli.Context) []config.Flag {
	var out []config.Flag
	for _, o := range config.Keys() {
		if o.Flag == "" || !c.IsSet(o.Flag) {
			continue
		}
		var v any
		switch o.Kind() {
		case "string":
			v = c.String(o.Flag)
		case "[]string":
			v = append([]string{}, c.StringSlice(o.Flag)...)
		case "bool":
			v = c.Bool(o.Flag)
		case "int":
			v = c.Int(o.Flag)
		case "time.Duration":
			v = c.Duration(o.Flag)
		}
		out = append(out, config.Flag{Key: o.Key, Name: "--" + o.Flag, Value: v})
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
			}, keyFlags()...),
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

// applyConfig puts the effective config's sections into a daemon.Config.
func applyConfig(cfg *daemon.Config, eff *config.Config) {
	cfg.Guard, cfg.Cache, cfg.Agents = eff.Guard, eff.Cache, eff.Agents
	cfg.Journal, cfg.State = eff.Journal, eff.State
	cfg.Sessions = eff.Sessions
	cc := eff.Compact
	cfg.Compact = &cc
}
