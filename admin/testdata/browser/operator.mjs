// operator.mjs: an operator's visit to the admin page, in Chromium driven
// by puppeteer-core: log in (a wrong token first), set an override from
// the page's form, flip a policy's shadow, delete the override, log out.
// Between steps it sends requests to the limited service as a client
// would, so that the Go test sees the override applied to them. Each
// observation is printed as one JSON line: {"step": ..., ...}.
//
// usage: node operator.mjs CHROMIUM ADMIN_URL TOKEN SERVICE_URL
import puppeteer from 'puppeteer-core';

const [browserPath, adminURL, token, serviceURL] = process.argv.slice(2);
const say = (step, fields) => console.log(JSON.stringify({ step, ...fields }));

const browser = await puppeteer.launch({
  executablePath: browserPath,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run'],
});
try {
  const page = await browser.newPage();
  const text = async (sel) => (await page.$(sel)) ? page.$eval(sel, (e) => e.textContent.trim()) : '';
  const submit = async (formSel) => {
    await Promise.all([page.waitForNavigation(), page.$eval(formSel, (f) => f.requestSubmit())]);
  };
  const service = async (n) => {
    const statuses = [];
    let policy = '';
    for (let i = 0; i < n; i++) {
      const r = await fetch(serviceURL, { headers: { 'X-API-Key': 'k1' } });
      statuses.push(r.status);
      policy = r.headers.get('ratelimit-policy') || policy;
    }
    return { statuses, policy };
  };

  let res = await page.goto(adminURL);
  say('open', { status: res.status(), login: !!(await page.$('form#login')), policies: !!(await page.$('#policies')) });

  await page.type('form#login input[name=token]', 'not the token');
  await submit('form#login');
  say('wrong token', { error: await text('#error'), login: !!(await page.$('form#login')) });

  await page.type('form#login input[name=token]', token);
  await submit('form#login');
  const cookies = await page.cookies();
  const session = cookies.find((c) => c.name === 'ratelimit_admin') || {};
  say('logged in', {
    policies: !!(await page.$('#policies')),
    httpOnly: !!session.httpOnly, sameSite: session.sameSite || '', expires: session.expires || 0,
  });

  await page.select('form#set select[name=policy]', 'rpm');
  await page.type('form#set input[name=key]', 'k1');
  await page.type('form#set input[name=quota]', '2');
  await submit('form#set');
  say('set', { notice: await text('#notice'), error: await text('#error'), overrides: await text('#overrides + table tbody') });
  say('service after set', await service(3));

  await submit('tr.policy form:has(input[name=policy][value=login])');
  say('shadow', { notice: await text('#notice'), error: await text('#error') });

  await submit('tr.override form:has(input[name=policy][value=rpm])');
  say('delete', { notice: await text('#notice'), error: await text('#error'), overrides: await text('#overrides + table tbody') });
  say('service after delete', await service(1));

  say('changes', {
    rows: (await page.$$('tr.change')).length,
    who: await page.$$eval('tr.change td:nth-child(2)', (tds) => tds.map((td) => td.textContent)),
    what: await page.$$eval('tr.change td:nth-child(3)', (tds) => tds.map((td) => td.textContent)),
    note: await text('p.note'),
  });

  await submit('form[action=logout]');
  say('logged out', { login: !!(await page.$('form#login')) });
  res = await page.goto(adminURL);
  say('open again', { login: !!(await page.$('form#login')), policies: !!(await page.$('#policies')) });
  const stale = await fetch(new URL('overrides', adminURL), { headers: { Cookie: `ratelimit_admin=${session.value}` } });
  say('old cookie', { status: stale.status });
} finally {
  await browser.close();
}
