package benchkit

import (
	"fmt"
	"os"
	"path/filepath"
)

// NpmSteps is bench/agent's JavaScript project workload (-workload npm):
// a Node.js project (express, with jest for its test) installed from a
// warm npm cache (MakeNpmOrigin), its one test run, a search and a walk
// of node_modules, and the removal of the project. Every step is the
// project's own tool; $ORIGIN names what MakeNpmOrigin made. The install
// writes about 5,000 files in 840 directories, and rm -rf removes them.
var NpmSteps = []Step{
	// --prefer-offline: the packages and their metadata come from the
	// cache MakeNpmOrigin filled, so the network is out of the timing.
	{"install", "mkdir work && cp \"$ORIGIN\"/project/* work/ && cd work && " +
		"npm ci --prefer-offline --no-audit --no-fund --cache \"$ORIGIN/npm-cache\" >/dev/null"},
	// jest's transform cache lives outside the workspace, where jest puts
	// it by default (under /tmp), warm after the first run.
	{"test", "cd work && npx --offline jest --ci --cacheDirectory \"$ORIGIN/jest-cache\" >/dev/null 2>&1"},
	{"grep", "cd work && grep -rl 'module.exports' node_modules >/dev/null"},
	{"find", "cd work && find node_modules -name package.json >/dev/null"},
	{"rm", "rm -rf work"},
}

// npmPackage and npmTest are the project MakeNpmOrigin installs: a web
// framework and a test runner, the dependencies of a typical small
// Node.js service (about 340 packages with their own dependencies).
const (
	npmPackage = `{"name":"bench-project","version":"1.0.0","private":true,
"scripts":{"test":"jest"},
"dependencies":{"express":"4.21.2"},
"devDependencies":{"jest":"29.7.0"}}
`
	npmTest = `const express = require('express');
test('an app routes', () => {
  const app = express();
  app.get('/', (req, res) => res.send('ok'));
  expect(typeof app.listen).toBe('function');
});
`
)

// MakeNpmOrigin makes what NpmSteps installs under origin: project/ (a
// package.json, the package-lock.json npm resolved for it, a test) and
// npm-cache/, filled by one install from the registry. It needs npm and
// the npm registry (the network) once, here; the timed steps do not.
func MakeNpmOrigin(origin string) error {
	project := filepath.Join(origin, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		return err
	}
	for name, body := range map[string]string{"package.json": npmPackage, "sum.test.js": npmTest} {
		if err := os.WriteFile(filepath.Join(project, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	script := "cd " + Shq(project) + " && npm install --no-audit --no-fund --cache " + Shq(filepath.Join(origin, "npm-cache")) +
		" >/dev/null && rm -rf node_modules"
	if _, err := Run("/", script); err != nil {
		return fmt.Errorf("making the npm origin (npm and the npm registry are needed once): %v", err)
	}
	return nil
}
