package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ebitengine/purego"
)

// libSpec says where to look for one shared library.
type libSpec struct {
	// base is the file name without version, e.g. "libnvrtc.so".
	base string
	// env names a variable holding an explicit path, tried first.
	env string
	// sonames are tried through dlopen's own search (LD_LIBRARY_PATH,
	// ld.so.cache), in order, after env.
	sonames []string
	// companions are libraries (base names, e.g. "libcublasLt.so") loaded
	// from a candidate's own folder before the candidate, for folders the
	// dynamic loader does not search.
	companions []string
}

// searchDirs are the folders globbed for base* after the sonames: CUDA
// toolkits, distribution folders, and the NVIDIA Python wheels (PyTorch's
// nvidia/cu13/lib, nvidia/cublas/lib, nvidia/cuda_nvrtc/lib).
var searchDirs = []string{
	"/usr/local/cuda/lib64",
	"/usr/local/cuda/targets/*-linux/lib",
	"/usr/local/cuda-*/lib64",
	"/usr/local/cuda-*/targets/*-linux/lib",
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu",
	"/usr/lib64",
	"/opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib",
	"/opt/*/lib/python3*/site-packages/nvidia/*/lib",
	"/usr/local/lib/python3*/dist-packages/nvidia/*/lib",
	"/usr/local/lib/python3*/site-packages/nvidia/*/lib",
	"/usr/lib/python3/dist-packages/nvidia/*/lib",
}

// candidates lists what openLibrary tries, in order: $env, the sonames, then
// every file matching base* in $CUDA_HOME/lib64, $CUDA_PATH/lib64 and
// searchDirs, newest version first within a folder, symbolic links to the
// same file listed once.
func (s libSpec) candidates() []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		key := p
		if filepath.IsAbs(p) {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				key = r
			}
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, p)
		}
	}
	if s.env != "" {
		if p := os.Getenv(s.env); p != "" {
			add(p)
		}
	}
	for _, n := range s.sonames {
		add(n)
	}
	dirs := []string{}
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if d := os.Getenv(v); d != "" {
			dirs = append(dirs, filepath.Join(d, "lib64"), filepath.Join(d, "lib"))
		}
	}
	dirs = append(dirs, searchDirs...)
	for _, d := range dirs {
		matches, _ := filepath.Glob(filepath.Join(d, s.base+"*"))
		slices.SortFunc(matches, compareVersionsDesc)
		for _, m := range matches {
			add(m)
		}
	}
	return out
}

// compareVersionsDesc orders "libx.so.13.0.1" before "libx.so.12.9" before
// "libx.so" (newest first), comparing the dotted numbers after ".so".
func compareVersionsDesc(a, b string) int {
	va, vb := soVersion(a), soVersion(b)
	for i := 0; i < len(va) || i < len(vb); i++ {
		x, y := -1, -1
		if i < len(va) {
			x = va[i]
		}
		if i < len(vb) {
			y = vb[i]
		}
		if x != y {
			if x > y {
				return -1
			}
			return 1
		}
	}
	return strings.Compare(a, b)
}

// soVersion parses the numbers after ".so." in a file name ("libx.so.13.0"
// -> [13 0]); a non-number ends the list.
func soVersion(p string) []int {
	name := filepath.Base(p)
	i := strings.Index(name, ".so.")
	if i < 0 {
		return nil
	}
	var v []int
	for _, part := range strings.Split(name[i+4:], ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			break
		}
		v = append(v, n)
	}
	return v
}

// openLibrary dlopens the first candidate that loads and that accept (if not
// nil) takes; it returns the handle and the candidate's name. The error
// lists why each candidate was passed over (at most 6).
func openLibrary(s libSpec, accept func(handle uintptr, path string) error) (uintptr, string, error) {
	var why []string
	for _, c := range s.candidates() {
		if filepath.IsAbs(c) {
			loadCompanions(filepath.Dir(c), s.companions)
		}
		h, err := purego.Dlopen(c, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		if accept != nil {
			if err := accept(h, c); err != nil {
				why = append(why, c+": "+err.Error())
				continue
			}
		}
		return h, c, nil
	}
	if len(why) > 6 {
		why = append(why[:6], fmt.Sprintf("and %d more", len(why)-6))
	}
	return 0, "", fmt.Errorf("%s: no loadable candidate (%s)", s.base, strings.Join(why, "; "))
}

// loadCompanions dlopens (RTLD_GLOBAL) the newest dir/base* of each base
// name; failures are ignored (the candidate's own dlopen reports them).
func loadCompanions(dir string, bases []string) {
	for _, b := range bases {
		matches, _ := filepath.Glob(filepath.Join(dir, b+"*"))
		slices.SortFunc(matches, compareVersionsDesc)
		for _, m := range matches {
			if _, err := purego.Dlopen(m, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
				break
			}
		}
	}
}

// bind registers the first of names that lib exports into fptr (a pointer
// to a func variable); versioned names come first (cuMemAlloc_v2, then
// cuMemAlloc).
func bind(lib uintptr, fptr any, names ...string) error {
	for _, n := range names {
		addr, err := purego.Dlsym(lib, n)
		if err == nil && addr != 0 {
			purego.RegisterFunc(fptr, addr)
			return nil
		}
	}
	return fmt.Errorf("symbol %s not exported", strings.Join(names, " or "))
}

// binding is one entry of a symbol table: where to store the function and
// the names to try.
type binding struct {
	fptr  any
	names []string
}

// bindAll binds every entry, returning the first failure.
func bindAll(lib uintptr, table []binding) error {
	for _, b := range table {
		if err := bind(lib, b.fptr, b.names...); err != nil {
			return err
		}
	}
	return nil
}
