// Package buildbin builds the holdfast binary for tests that run it as a real process
// (the examples' tests and the integration harness), so both find the module and
// invoke the go tool the same way.
package buildbin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Build compiles ./cmd/holdfast of this module into dir and returns the binary's path.
func Build(dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "holdfast")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	cmd := exec.Command(goTool(), "build", "-o", bin, "./cmd/holdfast")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/holdfast: %v\n%s", err, out)
	}
	return bin, nil
}

// goTool is the go command: from PATH, else from the GOROOT the test binary was built
// with (a test run by `go test` has the toolchain's bin directory on PATH anyway).
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}

// ModuleRoot is the directory of this module's go.mod, found from the working directory
// (a test runs in its package's directory) upwards.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/holdfast/holdfast\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod of github.com/holdfast/holdfast not found above the working directory")
		}
		dir = parent
	}
}

// BuildRevision compiles ./cmd/holdfast as it was at git revision rev (a tag or commit of
// this module's repository) into dir and returns the binary's path: a test of an upgrade
// runs the previous release beside this one. It needs the repository's history.
func BuildRevision(dir, rev string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", rev)
	extract := exec.Command("tar", "-x", "-C", src)
	var errb bytes.Buffer
	archive.Stderr, extract.Stderr = &errb, &errb
	if extract.Stdin, err = archive.StdoutPipe(); err != nil {
		return "", err
	}
	if err := extract.Start(); err != nil {
		return "", err
	}
	if err := archive.Run(); err != nil {
		_ = extract.Wait()
		return "", fmt.Errorf("git archive %s: %v\n%s", rev, err, errb.String())
	}
	if err := extract.Wait(); err != nil {
		return "", fmt.Errorf("extracting %s: %v\n%s", rev, err, errb.String())
	}
	bin := filepath.Join(dir, "holdfast-"+rev)
	cmd := exec.Command(goTool(), "build", "-o", bin, "./cmd/holdfast")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/holdfast at %s: %v\n%s", rev, err, out)
	}
	return bin, nil
}
