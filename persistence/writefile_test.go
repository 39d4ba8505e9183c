package persistence

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// WriteFile replaces a file whole: the new content under the name, nothing left beside
// it; a write that fails leaves the old content and no temporary file.
func TestWriteFileReplacesWholeOrNotAtAll(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "published")
	write := func(s string) func(*os.File) error {
		return func(f *os.File) error { _, err := f.WriteString(s); return err }
	}
	if err := WriteFile(path, write("12\n")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, write("7\n")); err != nil { // shorter: no tail of the old one
		t.Fatal(err)
	}
	wantFile(t, path, "7\n")

	boom := errors.New("disk full")
	err := WriteFile(path, func(f *os.File) error {
		if _, err := f.WriteString("99"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("failed write: %v, want %v", err, boom)
	}
	wantFile(t, path, "7\n")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries after a failed write, want only the file", len(entries))
	}

	// A file in a directory that does not exist is refused, and nothing is created.
	if err := WriteFile(filepath.Join(dir, "no", "such"), write("x")); err == nil {
		t.Fatal("a write into a missing directory succeeded")
	}
}

func wantFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Fatalf("%s holds %q, want %q", path, b, want)
	}
}
