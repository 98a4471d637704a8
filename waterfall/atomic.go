package waterfall

import "sync/atomic"

type atomicList[L any] struct{ p atomic.Pointer[list[L]] }

func (a *atomicList[L]) load() []entry[L] {
	if l := a.p.Load(); l != nil {
		return l.entries
	}
	return nil
}

func (a *atomicList[L]) store(l *list[L]) { a.p.Store(l) }
