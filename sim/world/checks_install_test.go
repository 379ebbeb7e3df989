package world

func init() { SetChecks(Default()) }
