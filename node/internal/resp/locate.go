package resp

// KeyOf maps key as the port's commands do (KeyMap.Map, placed by its
// PlaceSlot in Redis Cluster mode): the namespace, chunk id and placement
// key it is stored under. For the admin API's locate endpoint; it does not
// look the namespace up, so a key of a namespace that does not exist (or
// whose write fell back to the default namespace) maps to its own.
func (s *Server) KeyOf(key []byte) Key {
	return s.place(s.cfg.KeyMap.Map(key))
}

// place is k with its Place for Redis Cluster mode, where placement
// depends on the namespace (Cluster.SlotPlace); k itself outside it.
func (s *Server) place(k Key) Key {
	if s.cfg.ClusterMode {
		k.Place = s.cfg.Cluster.SlotPlace(k.Namespace, k.PlaceSlot)
	}
	return k
}
