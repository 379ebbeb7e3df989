// Package checks holds the simulator's checkers, each a func(*world.World)
// error (or, for a check of several rules, one that also returns the rule
// it found broken), one per check_*.go file, and their order: Default
// returns the step list (run after every step, first failure wins) and the
// end-of-run check, which package sim installs in every world with
// world.SetChecks. The checkers read the world's exported state and keep
// what they carry from step to step in it (world.JudgedLogs and the
// signatures next to it), so one world's checks never see another's.
//
// The checks that must look at the moment something happens, which a step
// checker could no longer see afterwards (a WRITE landing, Q-1; a D node's
// step, N-2; the producer's exit from its drain, S-2), are the world's own
// (sim/world/observe.go); the checkers here report what they recorded.
package checks
