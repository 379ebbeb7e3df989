//go:build !linux

package nvml

import (
	"errors"
	"runtime"
)

// noLibrary is the library on systems where baton does not load NVML.
type noLibrary struct{}

func newLibrary() library { return noLibrary{} }

func (noLibrary) load() error {
	return errors.New("NVML is loaded on linux only, not " + runtime.GOOS)
}
func (noLibrary) initialize() int                             { return retLibraryNotFound }
func (noLibrary) shutdown() int                               { return retSuccess }
func (noLibrary) errorString(int) string                      { return "not loaded" }
func (noLibrary) driverVersion() (string, int)                { return "", retLibraryNotFound }
func (noLibrary) cudaDriverVersion() (int, int)               { return 0, retLibraryNotFound }
func (noLibrary) deviceCount() (int, int)                     { return 0, retLibraryNotFound }
func (noLibrary) deviceName(int) (string, int)                { return "", retLibraryNotFound }
func (noLibrary) deviceUUID(int) (string, int)                { return "", retLibraryNotFound }
func (noLibrary) deviceMemory(int) (uint64, uint64, int)      { return 0, 0, retLibraryNotFound }
func (noLibrary) deviceComputeCapability(int) (int, int, int) { return 0, 0, retLibraryNotFound }
func (noLibrary) deviceUtilization(int) (uint32, int)         { return 0, retLibraryNotFound }
