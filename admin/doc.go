// Package admin lets operators change a service's limits while it runs,
// on every instance at once, without a redeploy: for one policy (a
// limit's name), another quota or window for one key, for the keys of a
// prefix, or for every key; or unlimited; or blocked.
//
// A [Plane] keeps a namespace's overrides in Redis, beside the counters,
// and each instance's Plane reads them every 250ms into a table in
// process, from which a Limiter finds a request's override with no call
// to Redis:
//
//	redisStore, err := store.NewRedis(client, store.RedisOptions{})
//	plane, err := admin.New(redisStore, "api", admin.Options{})
//	defer plane.Close()
//	limiter, err := ratelimit.New(redisStore, "api", // or a Fallback around it
//		ratelimit.WithLimits(ratelimit.PerMinute(40_000).Named("gen-tpm")),
//		ratelimit.WithOverrides(plane))
//	// On any instance, later:
//	err = plane.Set(ctx, admin.Override{Policy: "gen-tpm", StoredKey: "k:…", Quota: 100_000})
//
// The Plane's handler serves the same to operators, as JSON and as a
// page to act from (see [Plane.Handler]). See docs/overrides.md for what
// a change does to a window under way, the bounds, and the faults.
package admin
