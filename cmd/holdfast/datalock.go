//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDataDir takes an exclusive advisory lock on <dir>/LOCK for the life of the process,
// so two servers can never append to the same journals. The kernel drops the lock when
// the process dies, kill -9 included.
func lockDataDir(dir string) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another holdfast process", dir)
		}
		return nil, fmt.Errorf("locking data directory %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
