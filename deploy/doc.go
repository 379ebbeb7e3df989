// Package deploy holds no code: it is the home of the manifests that run a
// baton simulator sweep on an engine the user already runs, and of their
// tests (test-only imports, so the baton binary does not grow):
//
//   - kubernetes/sim-indexed-job.yaml: an Indexed Job, one pod per shard
//     (JOB_COMPLETION_INDEX, BATON_SHARDS), results, seed store and traces
//     on the volume of kubernetes/results-pvc.yaml; kubernetes/sim-merge-job.yaml
//     merges them; kubernetes/Dockerfile builds the image they name.
//   - github/sim-matrix.yml: a GitHub Actions matrix over shards and a merge job.
//
// deploy_test.go decodes the manifests strictly into the Kubernetes API
// types (k8s.io/api), lints the workflow with actionlint, and runs the
// Job's and the workflow's commands as separate baton processes, checking
// that the merge of the shards equals one process's run of the range.
package deploy
