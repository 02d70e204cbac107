package witness

// LogFile and Ops let the package's tests open a File whose log fails on
// purpose (a full disk, an I/O error, a directory that cannot be synced).
type LogFile = logFile

// Ops replaces the File's file operations; a nil field keeps the real one.
type Ops struct {
	Open    func(name string, flag int) (LogFile, error)
	SyncDir func(dir string) error
}

// OpenFileOps is OpenFile with some file operations replaced.
func OpenFileOps(dir string, o Ops) (*File, error) {
	ops := osOps
	if o.Open != nil {
		ops.open = o.Open
	}
	if o.SyncDir != nil {
		ops.syncDir = o.SyncDir
	}
	return openFile(dir, ops)
}

// RealOpen is the real open the File uses.
func RealOpen(name string, flag int) (LogFile, error) { return osOps.open(name, flag) }
