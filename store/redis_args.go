package store

// redisKey is the Redis key of key's state named by suffix: a limit's
// (spec.Limit.Suffix), the ban's (spec.BanSuffix), a charge's identity
// (spec.ChargeSuffix and the identity). The braces are a hash tag: all of
// key's state sits in one Redis Cluster slot.
func redisKey(prefix, key, suffix string) string {
	return prefix + "{" + key + "}" + suffix
}
