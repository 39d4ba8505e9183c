package persistence

import (
	"os"
	"path/filepath"
)

// WriteFile stores the file at path whole and durably, or leaves it as it was: write fills
// a temporary file beside it (path + ".tmp"), which is fsynced, closed and renamed over
// path, and then the directory is fsynced — fsyncing a file does not persist its
// directory entry, so without it a power loss can leave the old file or none. Whatever
// moment a crash comes, path holds the old content or the new, never part of it. On an
// error the temporary file is removed.
//
// Every small file Holdfast keeps beside its journals goes through it (a shard's
// published position, the data directory's layout and identity, snapshots, backups):
// the rule is written once.
func WriteFile(path string, write func(f *os.File) error) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp) // best effort: a leftover is overwritten by the next write
		return err
	}
	return syncDir(filepath.Dir(path))
}
