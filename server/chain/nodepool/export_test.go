package nodepool

// Due is how many nodes the next probe round would read.
func (g *group[C]) Due() int { return len(g.due()) }
