package policy

// Config returns the effective configuration, defaults applied, for the
// tests.
func (p *Policy) Config() Config { return p.cfg }
