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
//	plane, err := admin.New(client, "api", admin.Options{})
//	defer plane.Close()
//	limiter, err := ratelimit.New(st, "api",
//		ratelimit.WithLimits(ratelimit.PerMinute(40_000).Named("gen-tpm")),
//		ratelimit.WithOverrides(plane))
//	// On any instance, later:
//	err = plane.Set(ctx, admin.Override{Policy: "gen-tpm", Key: "k:…", Quota: 100_000})
//
// See docs/overrides.md for what a change does to a window under way,
// the bounds, and the faults.
package admin
