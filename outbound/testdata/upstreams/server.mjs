// server.mjs: a rate-limited API as its users configure one, for
// outbound's TestRealUpstreams: express with express-rate-limit, which
// states its limit in one of its header forms, or with
// rate-limiter-flexible, which refuses with a 429 and Retry-After only.
// Every client shares one limit (the key is fixed). It prints its port,
// then serves GET /api (limited) and GET /stats (not limited): the
// requests admitted and refused, in all and in each of its windows, when
// the first was refused, its Retry-After, and how many came after it but
// before that time.
//
// usage: node server.mjs FORM LIMIT WINDOW_MS
//   FORM: draft-6, draft-7, draft-8 (express-rate-limit's standardHeaders),
//         legacy (its X-RateLimit-* alone), flexible (rate-limiter-flexible)
import express from 'express';
import { rateLimit } from 'express-rate-limit';
import { RateLimiterMemory } from 'rate-limiter-flexible';

const [form, limitArg, windowArg] = process.argv.slice(2);
const limit = Number(limitArg);
const windowMs = Number(windowArg);
const stats = { admitted: 0, refused: 0, firstRefusedAt: 0, retryAfter: 0, sentInHold: 0, sentAfterRefusal: 0, start: Date.now(), windows: [] };
// The server's windows, in order, each with what it admitted and refused.
const windowOf = (end) => {
  let w = stats.windows.find((w) => Math.abs(w.end - end) < 200);
  if (!w) {
    w = { end, admitted: 0, refused: 0 };
    stats.windows.push(w);
    stats.windows.sort((a, b) => a.end - b.end);
  }
  return w;
};

const app = express();
app.get('/stats', (req, res) => res.json(stats));
// Requests that arrive after the first refusal, before its Retry-After.
app.use('/api', (req, res, next) => {
  if (stats.firstRefusedAt && Date.now() < stats.firstRefusedAt + stats.retryAfter * 1000) {
    stats.sentInHold++;
    // Of those, the ones the client sent after the refusal (X-Sent-At, in
    // ms on the same clock), not in flight when it came.
    if (Number(req.get('X-Sent-At')) > stats.firstRefusedAt) {
      stats.sentAfterRefusal++;
    }
  }
  next();
});

const refused = (res) => {
  stats.refused++;
  if (!stats.firstRefusedAt) {
    stats.firstRefusedAt = Date.now();
    stats.retryAfter = Number(res.getHeader('Retry-After') || 0);
  }
};

if (form === 'flexible') {
  const limiter = new RateLimiterMemory({ points: limit, duration: windowMs / 1000 });
  app.get('/api', async (req, res) => {
    try {
      const r = await limiter.consume('everyone');
      stats.admitted++;
      windowOf(Date.now() + r.msBeforeNext).admitted++;
      res.send('ok');
    } catch (r) {
      res.set('Retry-After', String(Math.ceil(r.msBeforeNext / 1000)));
      refused(res);
      windowOf(Date.now() + r.msBeforeNext).refused++;
      res.status(429).send('Too Many Requests');
    }
  });
} else {
  const limiter = rateLimit({
    windowMs,
    limit,
    standardHeaders: form === 'legacy' ? false : form,
    legacyHeaders: form === 'legacy',
    keyGenerator: () => 'everyone',
    handler: (req, res, next, options) => {
      refused(res);
      windowOf(req.rateLimit.resetTime.getTime()).refused++;
      res.status(options.statusCode).send(options.message);
    },
  });
  app.get('/api', limiter, (req, res) => {
    stats.admitted++;
    windowOf(req.rateLimit.resetTime.getTime()).admitted++;
    res.send('ok');
  });
}

const server = app.listen(0, '127.0.0.1', () => console.log(server.address().port));
