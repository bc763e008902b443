package auth

// Lookups is how many times the database was asked for a key.
func (k *Keys) Lookups() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lookups
}

// Cached reports whether the cache of known keys holds secret's, however old.
func (k *Keys) Cached(secret string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.cache[string(hashSecret(secret))]
	return ok
}
