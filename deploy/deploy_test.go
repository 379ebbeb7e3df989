package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mattn/go-shellwords"
	"github.com/rhysd/actionlint"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// testCommit is the commit the tests stamp into their baton build, as the
// Dockerfile's COMMIT and `make build` do: `baton report merge` refuses
// the shards of an unstamped build (commit "unknown"), and go build's
// own VCS stamp is absent outside a checkout or with -buildvcs=false.
const testCommit = "deploy-test"

// baton builds the baton binary once per test binary (the tests that run
// it need it; the manifest checks do not), stamped with testCommit, and
// returns its path.
func baton(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "baton-deploy-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "baton")
		out, err := exec.Command("go", "build", "-ldflags", "-X github.com/baton-dev/baton/conformance/check.buildCommit="+testCommit,
			"-o", binary, "github.com/baton-dev/baton/cmd/baton").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build baton: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binary != "" {
		os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

// sweepExitCodes are `baton sim`'s exit codes for a range that found
// something (cmd/baton: 1 correctness, 2 liveness, 5 crash, 6
// nondeterministic, 7 coverage) and 3, bad flags.
var sweepExitCodes = []int32{1, 2, 3, 5, 6, 7}

// decodeStrict decodes a manifest into out strictly (decodeStrictBytes).
func decodeStrict(t *testing.T, path string, out any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := decodeStrictBytes(raw, out); err != nil {
		t.Fatalf("%s does not decode strictly: %v", path, err)
	}
}

// decodeStrictBytes decodes a YAML manifest into out as the API server
// does in strict mode: YAML to JSON rejecting duplicate keys
// (sigs.k8s.io/yaml), then sigs.k8s.io/json's strict decoding, which
// matches field names case-sensitively and rejects unknown and duplicate
// fields. (sigs.k8s.io/yaml.UnmarshalStrict decodes with encoding/json,
// which matches "Completions" to the field "completions": a key in the
// wrong case, which the API server drops, would pass.)
func decodeStrictBytes(raw []byte, out any) error {
	j, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(j, out)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

// flagValue is the value after flag in args ("" when absent).
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// sweepJob decodes the Indexed Job and checks what its shards will run.
func sweepJob(t *testing.T) (batchv1.Job, corev1.Container) {
	t.Helper()
	var job batchv1.Job
	decodeStrict(t, "kubernetes/sim-indexed-job.yaml", &job)
	if job.APIVersion != "batch/v1" || job.Kind != "Job" {
		t.Fatalf("apiVersion %q kind %q", job.APIVersion, job.Kind)
	}
	spec := job.Spec
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion {
		t.Fatalf("completionMode %v, want Indexed (JOB_COMPLETION_INDEX in every pod)", spec.CompletionMode)
	}
	if spec.Completions == nil || spec.Parallelism == nil || *spec.Parallelism < 1 || *spec.Parallelism > *spec.Completions {
		t.Fatalf("completions %v parallelism %v", spec.Completions, spec.Parallelism)
	}
	pod := spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever || len(pod.Containers) != 1 {
		t.Fatalf("restartPolicy %q, %d containers: want Never and one", pod.RestartPolicy, len(pod.Containers))
	}
	c := pod.Containers[0]
	env := envOf(c)
	if n, err := strconv.Atoi(env["BATON_SHARDS"]); err != nil || int32(n) != *spec.Completions {
		t.Errorf("BATON_SHARDS=%q, completions %d: the shard count must equal the completions", env["BATON_SHARDS"], *spec.Completions)
	}
	if len(c.Command) != 1 || filepath.Base(c.Command[0]) != "baton" || len(c.Args) == 0 || c.Args[0] != "sim" {
		t.Fatalf("command %q args %q: want baton sim", c.Command, c.Args)
	}
	if slices.Contains(c.Args, "--shard") || !strings.HasPrefix(flagValue(c.Args, "--seeds"), "$(") {
		t.Errorf("args %q: the shard must come from JOB_COMPLETION_INDEX, the range from the env", c.Args)
	}
	// The results, store and traces go to the volume.
	if len(c.VolumeMounts) != 1 {
		t.Fatalf("volume mounts %v", c.VolumeMounts)
	}
	mount := c.VolumeMounts[0]
	for _, flag := range []string{"--results", "--store", "--trace-dir"} {
		if v := flagValue(c.Args, flag); !strings.HasPrefix(v, mount.MountPath+"/") {
			t.Errorf("%s %q is not on the volume mounted at %s", flag, v, mount.MountPath)
		}
	}
	if !strings.HasSuffix(flagValue(c.Args, "--results"), "/") {
		t.Errorf("--results %q must be a directory (one file per shard)", flagValue(c.Args, "--results"))
	}
	vol := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })
	if vol < 0 || pod.Volumes[vol].PersistentVolumeClaim == nil {
		t.Fatalf("volume %q is not a persistent volume claim: %v", mount.Name, pod.Volumes)
	}
	var pvc corev1.PersistentVolumeClaim
	decodeStrict(t, "kubernetes/results-pvc.yaml", &pvc)
	if pvc.Name != pod.Volumes[vol].PersistentVolumeClaim.ClaimName || !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		t.Errorf("claim %q (modes %v) does not serve volume claim %q read-write-many", pvc.Name, pvc.Spec.AccessModes, pod.Volumes[vol].PersistentVolumeClaim.ClaimName)
	}
	// A verdict is a finding, not a flake: those exit codes fail the index.
	if spec.BackoffLimitPerIndex == nil || spec.PodFailurePolicy == nil {
		t.Fatalf("backoffLimitPerIndex %v podFailurePolicy %v", spec.BackoffLimitPerIndex, spec.PodFailurePolicy)
	}
	rule := spec.PodFailurePolicy.Rules[0]
	if rule.Action != batchv1.PodFailurePolicyActionFailIndex || rule.OnExitCodes == nil || rule.OnExitCodes.ContainerName == nil ||
		*rule.OnExitCodes.ContainerName != c.Name || rule.OnExitCodes.Operator != batchv1.PodFailurePolicyOnExitCodesOpIn || !slices.Equal(rule.OnExitCodes.Values, sweepExitCodes) {
		t.Errorf("pod failure policy %+v: want FailIndex on exit codes %v of container %s", rule, sweepExitCodes, c.Name)
	}
	return job, c
}

// TestDecodeStrictMalformed: a field in the wrong case (which the API
// server would drop), an unknown field, a duplicate key and a value of the
// wrong type are each rejected; the manifest itself decodes.
func TestDecodeStrictMalformed(t *testing.T) {
	raw, err := os.ReadFile("kubernetes/sim-indexed-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	if err := decodeStrictBytes(raw, &job); err != nil {
		t.Fatalf("the manifest: %v", err)
	}
	edit := func(old, new string) []byte {
		if !bytes.Contains(raw, []byte(old)) {
			t.Fatalf("the manifest lacks %q", old)
		}
		return bytes.Replace(raw, []byte(old), []byte(new), 1)
	}
	cases := map[string]struct {
		manifest []byte
		want     string
	}{
		"wrong case":      {edit("\n  completions: 4", "\n  Completions: 4"), "Completions"},
		"wrong case deep": {edit("restartPolicy: Never", "restartpolicy: Never"), "restartpolicy"},
		"unknown field":   {edit("\n  completions: 4", "\n  completions: 4\n  shards: 4"), "shards"},
		"duplicate key":   {edit("\n  completions: 4", "\n  completions: 4\n  completions: 5"), "completions"},
		"wrong type":      {edit("\n  completions: 4", "\n  completions: four"), "completions"},
	}
	for name, tc := range cases {
		err := decodeStrictBytes(tc.manifest, &batchv1.Job{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
	// The reason for decodeStrictBytes: encoding/json's case-insensitive
	// matching lets sigs.k8s.io/yaml.UnmarshalStrict take the wrong case.
	if err := yaml.UnmarshalStrict(cases["wrong case"].manifest, &batchv1.Job{}); err != nil {
		t.Logf("sigs.k8s.io/yaml.UnmarshalStrict now rejects a field in the wrong case too: %v", err)
	}
}

// TestIndexedJobManifest: the Indexed Job decodes strictly into batch/v1
// and runs `baton sim` per index with its results on the volume; the merge
// Job merges that directory.
func TestIndexedJobManifest(t *testing.T) {
	_, c := sweepJob(t)
	var merge batchv1.Job
	decodeStrict(t, "kubernetes/sim-merge-job.yaml", &merge)
	mc := merge.Spec.Template.Spec.Containers
	if len(mc) != 1 || len(mc[0].Args) < 3 || mc[0].Args[0] != "report" || mc[0].Args[1] != "merge" {
		t.Fatalf("merge job runs %q %q", mc[0].Command, mc[0].Args)
	}
	if want := strings.TrimSuffix(flagValue(c.Args, "--results"), "/"); mc[0].Args[2] != want {
		t.Errorf("the merge reads %q; the shards write %q", mc[0].Args[2], want)
	}
	if mc[0].VolumeMounts[0].MountPath != c.VolumeMounts[0].MountPath ||
		merge.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "baton-sim-results" {
		t.Errorf("the merge job does not mount the shards' volume")
	}
}

// expand applies Kubernetes' $(VAR) expansion of command and args from
// the container's env (undefined names stay as written).
func expand(args []string, env map[string]string) []string {
	re := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = re.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := env[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
	}
	return out
}

// runBaton runs the baton binary with args and exactly the variables env
// adds to the test's environment (no inherited BATON_* or JOB_* ones).
func runBaton(t *testing.T, args []string, env map[string]string) ([]byte, int, error) {
	cmd := exec.Command(baton(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BATON_") && !strings.HasPrefix(kv, "JOB_COMPLETION_INDEX=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return out, ee.ExitCode(), nil
	}
	return out, 0, err
}

// sameSweep is the part of a sweep result a merge must share with one
// process's run of the range: everything but where the shards were.
func sameSweep(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "shard")
	delete(m, "seeds")
	delete(m, "merged_shards")
	b, _ := json.MarshalIndent(m, "", " ")
	return string(b)
}

// testSeeds is the range the process tests sweep.
const testSeeds = "1..400"

// TestIndexedJobShardsMergeToOneRun runs the Job's command once per index
// as separate baton processes, with the environment the Job gives each pod
// (its env, BATON_SEEDS set to a short range, JOB_COMPLETION_INDEX) and its
// volume a temporary directory, then the merge Job's command; the merge
// equals one process's run of the same range.
func TestIndexedJobShardsMergeToOneRun(t *testing.T) {
	job, c := sweepJob(t)
	baton(t) // built before the pods' goroutines run it
	env := envOf(c)
	env["BATON_SEEDS"] = testSeeds
	volume := t.TempDir()
	onVolume := func(args []string, vol string) []string {
		out := make([]string, len(args))
		for i, a := range args {
			out[i] = strings.Replace(a, c.VolumeMounts[0].MountPath, vol, 1)
		}
		return out
	}
	args := onVolume(expand(c.Args, env), volume)
	n := int(*job.Spec.Completions)
	var wg sync.WaitGroup
	outs, codes := make([][]byte, n), make([]int, n)
	for i := 0; i < n; i++ {
		podEnv := map[string]string{"JOB_COMPLETION_INDEX": strconv.Itoa(i)}
		for k, v := range env {
			podEnv[k] = v
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if outs[i], codes[i], err = runBaton(t, args, podEnv); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i := range outs {
		if codes[i] != 0 || !bytes.Contains(outs[i], []byte(fmt.Sprintf("shard %d/%d (seeds ", i, n))) {
			t.Fatalf("pod %d: exit %d\n%s", i, codes[i], outs[i])
		}
	}
	// One process, the same command without the Job's index and count.
	whole := t.TempDir()
	single := map[string]string{}
	for k, v := range env {
		if k != "BATON_SHARDS" {
			single[k] = v
		}
	}
	if out, code, err := runBaton(t, onVolume(expand(c.Args, env), whole), single); err != nil || code != 0 {
		t.Fatalf("one process: exit %d %v\n%s", code, err, out)
	}
	var merge batchv1.Job
	decodeStrict(t, "kubernetes/sim-merge-job.yaml", &merge)
	mergeArgs := onVolume(merge.Spec.Template.Spec.Containers[0].Args, volume)
	out, code, err := runBaton(t, mergeArgs, nil)
	if err != nil || code != 0 || !bytes.Contains(out, []byte(fmt.Sprintf("(%d shards merged)", n))) {
		t.Fatalf("merge: exit %d %v\n%s", code, err, out)
	}
	got := sameSweep(t, flagValue(mergeArgs, "--out"))
	want := sameSweep(t, filepath.Join(whole, "shards", "handoff-shard-0-of-1.json"))
	if !strings.Contains(got, `"commit": "`+testCommit+`"`) {
		t.Errorf("the merge is not of the stamped build %s:\n%s", testCommit, got)
	}
	if got != want {
		t.Errorf("the merge of %d pods differs from one process:\n--- merged\n%s\n--- one process\n%s", n, got, want)
	}
	if fi, err := os.Stat(filepath.Join(volume, "store")); err != nil || !fi.IsDir() {
		t.Errorf("the seed store was not created on the volume: %v", err)
	}
}

// TestWorkflowMatrix: the workflow passes actionlint (offline: no
// shellcheck, no network) and runs one job per shard 0..SHARDS-1 plus a
// merge job that needs them and runs even when a shard failed.
func TestWorkflowMatrix(t *testing.T) {
	raw, err := os.ReadFile("github/sim-matrix.yml")
	if err != nil {
		t.Fatal(err)
	}
	linter, err := actionlint.NewLinter(io.Discard, &actionlint.LinterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	errs, err := linter.Lint("github/sim-matrix.yml", raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Errorf("actionlint: %s", e.Error())
	}
	wf, perrs := actionlint.Parse(raw)
	if len(perrs) > 0 {
		t.Fatalf("parse: %v", perrs)
	}
	shards, err := strconv.Atoi(wf.Env.Vars["shards"].Value.Value)
	if err != nil {
		t.Fatalf("env SHARDS: %v", err)
	}
	shard := wf.Jobs["shard"]
	var values []string
	for _, v := range shard.Strategy.Matrix.Rows["shard"].Values {
		if sv, ok := v.(*actionlint.RawYAMLString); ok {
			values = append(values, sv.Value)
		} else {
			values = append(values, v.String())
		}
	}
	var want []string
	for i := 0; i < shards; i++ {
		want = append(want, strconv.Itoa(i))
	}
	if !slices.Equal(values, want) {
		t.Errorf("matrix shard %v, want %v (SHARDS=%d)", values, want, shards)
	}
	if shard.Strategy.FailFast == nil || shard.Strategy.FailFast.Value {
		t.Error("fail-fast must be false: one shard's finding must not cancel the others")
	}
	merge := wf.Jobs["merge"]
	if len(merge.Needs) != 1 || merge.Needs[0].Value != "shard" || merge.If == nil || merge.If.Value != "always()" {
		t.Errorf("the merge job must need the shards and run always()")
	}
	if sweep := workflowRun(t, shard, "bin/baton sim "); !strings.Contains(sweep, `--shard "${{ matrix.shard }}/$SHARDS"`) {
		t.Errorf("the sweep step does not take its shard from the matrix: %s", sweep)
	}
}

// workflowRun is the run script of job's step starting with prefix.
func workflowRun(t *testing.T, job *actionlint.Job, prefix string) string {
	t.Helper()
	for _, st := range job.Steps {
		if r, ok := st.Exec.(*actionlint.ExecRun); ok && strings.HasPrefix(r.Run.Value, prefix) {
			return r.Run.Value
		}
	}
	t.Fatalf("no step runs %q", prefix)
	return ""
}

// TestWorkflowShardsMergeToOneRun runs the workflow's sweep step once per
// matrix value (its ${{ matrix.shard }} and env substituted, SEEDS a short
// range, bin/baton the built binary, each shard in its own checkout
// directory) and the merge step over the shards' artifacts; the merge
// equals one process's run of the range.
func TestWorkflowShardsMergeToOneRun(t *testing.T) {
	raw, err := os.ReadFile("github/sim-matrix.yml")
	if err != nil {
		t.Fatal(err)
	}
	wf, _ := actionlint.Parse(raw)
	shards, _ := strconv.Atoi(wf.Env.Vars["shards"].Value.Value)
	sweep := workflowRun(t, wf.Jobs["shard"], "bin/baton sim ")
	mergeRun := workflowRun(t, wf.Jobs["merge"], "bin/baton report merge ")
	env := map[string]string{"SHARDS": strconv.Itoa(shards), "SEEDS": testSeeds}
	words := func(script string, matrixShard int) []string {
		script = strings.ReplaceAll(script, "${{ matrix.shard }}", strconv.Itoa(matrixShard))
		p := shellwords.NewParser()
		p.ParseEnv = true
		p.Getenv = func(k string) string { return env[k] }
		w, err := p.Parse(script)
		if err != nil {
			t.Fatalf("%q: %v", script, err)
		}
		if w[0] != "bin/baton" {
			t.Fatalf("%q does not run bin/baton", script)
		}
		return w[1:]
	}
	artifacts := t.TempDir() // download-artifact: shards/sim-shard-<i>/
	for i := 0; i < shards; i++ {
		checkout := filepath.Join(artifacts, "sim-shard-"+strconv.Itoa(i))
		args := words(sweep, i)
		for j, a := range args {
			if strings.HasPrefix(a, "out/sim/") {
				args[j] = filepath.Join(checkout, strings.TrimPrefix(a, "out/sim/")) + map[bool]string{true: "/"}[strings.HasSuffix(a, "/")]
			}
		}
		if out, code, err := runBaton(t, args, nil); err != nil || code != 0 {
			t.Fatalf("shard %d: exit %d %v\n%s", i, code, err, out)
		}
	}
	var margs []string // the shell's glob, the artifacts' directory
	for _, a := range words(mergeRun, 0) {
		switch {
		case a == "shards/*/shards":
			margs = append(margs, globAll(t, filepath.Join(artifacts, "*", "shards"))...)
		case strings.HasPrefix(a, "out/sim/"):
			margs = append(margs, filepath.Join(artifacts, "merged.json"))
		default:
			margs = append(margs, a)
		}
	}
	if out, code, err := runBaton(t, margs, nil); err != nil || code != 0 {
		t.Fatalf("merge %q: exit %d %v\n%s", margs, code, err, out)
	}
	whole := filepath.Join(t.TempDir(), "whole.json")
	if out, code, err := runBaton(t, []string{"sim", "--seeds", testSeeds, "--progress", "off", "--results", whole}, nil); err != nil || code != 0 {
		t.Fatalf("one process: exit %d %v\n%s", code, err, out)
	}
	if got, want := sameSweep(t, filepath.Join(artifacts, "merged.json")), sameSweep(t, whole); got != want {
		t.Errorf("the workflow's merge differs from one process:\n%s\n%s", got, want)
	}
}

func globAll(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) == 0 {
		t.Fatalf("%s: %v %v", pattern, m, err)
	}
	return m
}
