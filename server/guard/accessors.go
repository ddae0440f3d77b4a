package guard

// BalanceCap is the configured balance cap in µSTX (0 = off), for the
// discovery endpoint.
func (c *Chain) BalanceCap() uint64 { return c.balanceCap }
