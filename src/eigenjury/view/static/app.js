// eigenjury view: renders the viewer's JSON API. Every piece of text from a run goes
// into the page as a text node (el() below); nothing is ever parsed as markup.
"use strict";

const main = document.getElementById("main");
let current = null; // the run on screen: {id, data}

// --- building blocks --------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "onclick" || key === "onchange") node.addEventListener(key.slice(2), value);
    else if (value !== null && value !== undefined) node.setAttribute(key, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  return node;
}

// Four significant digits (integers whole), as the static reports write numbers.
function sig(value) {
  if (value === null || value === undefined) return "-";
  return Number.isInteger(value) ? String(value) : String(Number(Number(value).toPrecision(4)));
}

// `digits` decimals by the rule of Python's format, which writes the terminal and the
// static report: the nearest, and an exact tie to the even digit (toFixed breaks a tie
// away from zero: 1458.5 would read 1459 here and 1458 there).
function fixed(value, digits) {
  const rounded = value.toFixed(digits);
  const exact = Math.abs(value).toFixed(Math.min(100, digits + 60)); // the double, in full
  const dot = exact.indexOf(".");
  if (!/^50*$/.test(exact.slice(dot + 1 + digits))) return rounded;
  const kept = exact.slice(0, digits ? dot + 1 + digits : dot);
  if (Number(kept.at(-1)) % 2 === 1) return rounded;
  return (value < 0 ? "-" : "") + kept;
}

function num(value, digits = 2) {
  return value === null || value === undefined ? "-" : fixed(Number(value), digits);
}

function withCi(value, ci, digits = 2) {
  if (value === null || value === undefined) return "-";
  return ci && ci.length === 2 && ci[0] !== null
    ? `${num(value, digits)} [${num(ci[0], digits)}, ${num(ci[1], digits)}]`
    : num(value, digits);
}

// Which rule made the Elo, as the static report says it (reports/ranking/words.py elo_rule):
// records without settings.trust were made before eigenjury 0.3 changed it.
function eloRule(record) {
  return record.settings.trust
    ? "Elo since eigenjury 0.3: ties out of trust, a prior on scores, each judge's self-preference apart (docs/consensus.md); not comparable with older runs"
    : "Elo by the rule before eigenjury 0.3 (ties as half a win, no prior, a judge's verdicts on itself counted): not comparable with newer runs";
}

// An Elo interval may have no limit on one side (a perfect record; the record writes
// null there): [1268, ∞).
function openEnds(ci) {
  return ci && ci.length === 2 ? [ci[0] === null ? -Infinity : ci[0], ci[1] === null ? Infinity : ci[1]] : null;
}

function withOpenCi(value, ci, digits = 0) {
  const ends = openEnds(ci);
  if (value === null || value === undefined) return "-";
  if (!ends) return num(value, digits);
  const low = ends[0] === -Infinity ? "(-∞" : `[${num(ends[0], digits)}`;
  const high = ends[1] === Infinity ? "∞)" : `${num(ends[1], digits)}]`;
  return `${num(value, digits)} ${low}, ${high}`;
}

function estimate(e, digits = 3) {
  return e && typeof e === "object" && "value" in e ? withCi(e.value, e.ci, digits) : "-";
}

// An ISO time as a person reads it: "2026-11-30 18:41 UTC" (other offsets kept).
function when(iso) {
  return String(iso).replace("T", " ").replace(/:\d\d(\+00:00|Z)$/, " UTC");
}

function money(value) {
  return value === null || value === undefined ? "-" : `$${fixed(Number(value), 4)}`;
}

// A change, "+" when up, coloured: green up, red down.
function signed(value, digits) {
  const text = value > 0 ? `+${num(value, digits)}` : num(value, digits);
  return el("span", { class: value > 0 ? "up" : value < 0 ? "down" : null }, text);
}

// A table: headers, rows of cells (text or nodes); the first `left` columns align left
// (or the columns listed, when `left` is a list).
function table(headers, rows, attrs = {}, left = 1) {
  const cls = (i) => ((Array.isArray(left) ? left.includes(i) : i < left) ? "l" : null);
  return el(
    "table",
    attrs,
    el("tr", {}, headers.map((h, i) => el("th", { class: cls(i) }, h))),
    rows.map((row) =>
      row instanceof Node ? row : el("tr", {}, row.map((c, i) => el("td", { class: cls(i) }, c))),
    ),
  );
}

function section(title, ...content) {
  return el("section", {}, el("h2", {}, title), content);
}

function pre(text) {
  return el("pre", {}, text === null || text === undefined ? "-" : String(text));
}

function tag(text, kind) {
  return el("span", { class: `tag ${kind || text}` }, text);
}

async function api(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

function show(...nodes) {
  main.replaceChildren(...nodes);
}

// --- routing: #/, #/run/ID?filters, #/compare/A/B -----------------------------------

function route() {
  const [path, query] = location.hash.slice(1).split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(query || "");
  const done =
    parts[0] === "run" && parts[1]
      ? openRun(parts[1], params)
      : parts[0] === "compare" && parts[2]
        ? openComparison(parts[1], parts[2])
        : openList();
  done.catch((error) => show(el("p", { class: "warn", id: "error" }, error.message)));
}

window.addEventListener("hashchange", route);
route();

// --- the list of runs ---------------------------------------------------------------

async function openList() {
  current = null;
  const { runs, damaged } = await api("/api/runs");
  const rows = runs.map((run) => [
    run.kind,
    el("a", { href: `#/run/${run.id}`, class: "run" }, run.name),
    when(run.date),
    run.models.join(", "),
    money(run.cost_usd),
    run.where,
  ]);
  const ranking = runs.filter((run) => run.kind === "ranking");
  const parts = [
    el("h1", {}, "Runs"),
    table(["kind", "name", "date", "models", "cost", "where"], rows, { id: "runs" }, [0, 1, 2, 3, 5]),
  ];
  if (ranking.length >= 2) parts.push(compareForm(ranking));
  if (damaged.length) {
    parts.push(
      section(
        "Records that could not be read",
        damaged.map((d) => el("p", { class: "warn" }, d.problem)),
      ),
    );
  }
  show(...parts);
}

function compareForm(ranking) {
  const choice = (id, selected) =>
    el(
      "select",
      { id },
      ranking.map((run, i) =>
        el("option", { value: run.id, selected: i === selected ? "" : null }, `${run.name} (${when(run.date)})`),
      ),
    );
  // newest first: compare the latest with the newest run before it that shares the most
  // models with it (runs of other populations have nothing to compare)
  const shared = (run) => run.models.filter((m) => ranking[0].models.includes(m)).length;
  const before = ranking.reduce((best, run, i) => (i > 0 && shared(run) > shared(ranking[best]) ? i : best), 1);
  const a = choice("compare-a", before);
  const b = choice("compare-b", 0);
  const go = () => (location.hash = `#/compare/${a.value}/${b.value}`);
  return section(
    "Compare two ranking runs",
    el("div", { class: "filters" }, a, el("span", {}, "→"), b, el("button", { onclick: go, id: "compare" }, "Compare")),
  );
}

async function openComparison(a, b) {
  current = null;
  const [runA, runB, change] = await Promise.all([
    api(`/api/runs/${encodeURIComponent(a)}`),
    api(`/api/runs/${encodeURIComponent(b)}`),
    api(`/api/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`),
  ]);
  const rows = change.models.map((m) => [
    m.model,
    String(m.rank_a),
    String(m.rank_b),
    signed(-m.rank_change, 0),
    num(m.elo_a, 1),
    num(m.elo_b, 1),
    signed(m.elo_change, 1),
  ]);
  const names = (run) => run.record.models.map((m) => m.name).join(", ");
  show(
    el("h1", {}, `${runA.name} → ${runB.name}`),
    el("p", { class: "muted" }, `${when(runA.date)} → ${when(runB.date)}; models in both runs`),
    rows.length
      ? table(["model", "rank A", "rank B", "places up", "Elo A", "Elo B", "Elo change"], rows, { id: "change" })
      : el("p", { class: "warn", id: "no-common" },
        `No model is in both runs. A ranks ${names(runA)}; B ranks ${names(runB)}.`),
  );
}

// --- a run --------------------------------------------------------------------------

async function openRun(id, params) {
  if (current && current.id === id) {
    if (current.data.kind === "ranking") await showTranscripts(params);
    return;
  }
  const data = await api(`/api/runs/${encodeURIComponent(id)}`);
  current = { id, data };
  const head = [el("h1", {}, data.name), el("p", { class: "muted" }, `${data.kind} · ${when(data.date)} · ${data.where}`)];
  const render = { ranking: rankingRun, grading: gradingRun, "jury-comparison": juryComparison,
    "bound-certificate": certificate, "sensitivity-profile": profile, "style-check": styleCheck }[data.kind];
  show(...head, ...(render ? render(data.record, data) : [pre(JSON.stringify(data.record, null, 2))]));
  if (data.kind === "ranking") await showTranscripts(params);
}

function warnings(record) {
  return (record.warnings || []).map((w) => el("p", { class: "warn" }, w));
}

// Interval bars: one row per model, the point and its interval on a shared axis
// [low, high]; an interval running past the axis ends in an arrowhead at its edge.
function intervalBar(value, ci, low, high) {
  const width = 240;
  const x = (v) => (6 + ((Math.min(Math.max(v, low), high) - low) / (high - low || 1)) * (width - 12)).toFixed(1);
  const bar = svg("svg", { width, height: 16, role: "img" });
  bar.append(svg("line", { x1: 6, x2: width - 6, y1: 8, y2: 8, class: "axis" }));
  const ends = openEnds(ci);
  if (ends) {
    bar.append(svg("line", { x1: x(ends[0]), x2: x(ends[1]), y1: 8, y2: 8, class: "ci" }));
    if (ends[0] < low) bar.append(svg("path", { d: "M1 8 l7 -5 v10 z", class: "beyond" }));
    if (ends[1] > high) bar.append(svg("path", { d: `M${width - 1} 8 l-7 -5 v10 z`, class: "beyond" }));
  }
  bar.append(svg("circle", { cx: x(value), cy: 8, r: 4, class: "bar" }));
  return bar;
}

// The Elo axis: every interval, but no wider than twice the spread of the points (at
// least 100) either side of them, so one degenerate interval (a trust of zero in some
// bootstrap draw puts Elo near minus infinity) does not squash the others. As the
// static report draws it (reports/ranking/charts.py leaderboard_svg).
function eloAxis(models) {
  const elos = models.map((m) => m.elo);
  const ends = models.flatMap((m) => (openEnds(m.elo_ci) || [m.elo]).filter(Number.isFinite));
  const spread = 2 * Math.max(Math.max(...elos) - Math.min(...elos), 100);
  return [Math.max(Math.min(...ends), Math.min(...elos) - spread), Math.min(Math.max(...ends), Math.max(...elos) + spread)];
}

// `run`: the run as the API answers it (whether it has transcripts; what it means).
function rankingRun(record, run) {
  const models = record.models;
  const [low, high] = eloAxis(models);
  // with style control: Elo is with style held equal, the fit without it stands beside
  const styled = models.some((m) => m.elo_uncontrolled !== undefined && m.elo_uncontrolled !== null);
  const leaderboard = table(
    ["rank", "model", "Elo", "", ...(styled ? ["Elo uncontrolled", "change"] : []), "trust", "rank interval"],
    models.map((m) => [
      String(m.rank),
      m.name,
      withOpenCi(m.elo, m.elo_ci, 0),
      intervalBar(m.elo, m.elo_ci, low, high),
      ...(styled ? [num(m.elo_uncontrolled, 0), signed(m.rank_change, 0)] : []),
      withCi(m.trust, m.trust_ci, 3),
      m.rank_ci ? `${m.rank_ci[0]}–${m.rank_ci[1]}` : "-",
    ]),
    { id: "leaderboard" },
    2,
  );
  const calls = record.run || {}; // absent when fitted from a verdict file (`eigenjury fit`)
  // which interval is which, as the static report says it (reports/ranking/words.py intervals_note);
  // records without `pairwise_intervals` (no bootstrap, or older) have neither
  const method = record.settings.pairwise_intervals;
  const ciPct = `${sig(100 * record.settings.ci)}%`;
  const aboveAny = models.filter((m) => m.above && m.above.length);
  const pairwise = method ? [
    el("p", { class: "muted", id: "intervals" },
      `rank interval: marginal ${ciPct}, the percentiles of the model's rank over the bootstrap draws (each holds ` +
      `its own model's rank); above: the models it is above with family-wise ${ciPct} confidence, all such ` +
      `statements holding at once (simultaneous ${method} intervals on every pairwise Elo difference)`),
    aboveAny.length
      ? table(["model", `above (family-wise ${ciPct})`], aboveAny.map((m) => [m.name, m.above.join(", ")]), { id: "above" }, 2)
      : el("p", { id: "above" }, `No model is above another with family-wise ${ciPct} confidence.`),
  ] : [];
  const consistency = calls.order_consistency || {};
  const parseFailures = calls.parse_failures_by_judge || {};
  const judges = table(
    ["judge", "tie propensity", "position bias", "self-preference", "order consistency", "same slot", "pairs", "parse failures", "verdicts", "signal"],
    record.judges.map((j) => {
      const c = consistency[j.name] || {};
      return [
        j.external ? `${j.name} (external)` : j.name, // never judged: no trust of its own
        // at the fit's bound a judge answers by slot (reports/ranking/words.py SLOT_BOUND)
        bySlot(j) ? "not determined (answers by slot)" : withCi(j.tie_propensity, j.tie_propensity_ci, 3),
        bySlot(j) ? `always the ${j.position_bias > 0 ? "first" : "second"} slot (at the bound)`
          : withCi(j.position_bias, j.position_bias_ci, 3),
        // log-odds it adds to its own reply; absent for judges that never judged themselves
        j.self_verdicts ? `${withCi(j.self_preference, j.self_preference_ci, 2)} (n=${num(j.self_verdicts, 0)})` : "-",
        num(c.consistent, 3),
        num(c.same_slot, 3),
        c.pairs === undefined ? "-" : String(c.pairs),
        record.run ? String(parseFailures[j.name] || 0) : "-", // unknown when fitted from a file
        num(j.verdicts, 0),
        // stats.informative: whether its verdicts carry information (absent without bootstrap)
        j.signal ? j.signal.verdict + (j.signal.reason ? `: ${j.signal.reason}` : "") : "-",
      ];
    }),
    { id: "judges" },
  );
  const dims = Math.max(0, ...record.judges.map((j) => (j.lens || []).length));
  const axes = Array.from({ length: dims }, (_, i) => `d${i + 1}`);
  const lenses = table(
    ["model", ...axes.map((a) => `disposition ${a}`), ...axes.map((a) => `lens ${a}`)],
    models.map((m) => {
      const judge = record.judges.find((j) => j.name === m.name) || {};
      const disposition = (record.dispositions || {})[m.name] || [];
      return [m.name, ...axes.map((_, i) => num(disposition[i], 3)), ...axes.map((_, i) => num((judge.lens || [])[i], 3))];
    }),
    { id: "lenses" },
  );
  const fitted = `no calls: fitted from the verdict file ${record.source || ""}`;
  const accounting = calls.accounting;
  const cost = !accounting ? el("p", { class: "muted", id: "cost" }, fitted) : table(
    ["member", "role", "calls", "cached", "input tokens", "output tokens", "cost"],
    accounting.by_model_and_role
      .map((r) => [r.model, r.role, String(r.calls), String(r.cached), String(r.input_tokens), String(r.output_tokens), money(r.cost_usd)])
      .concat([["total", "", String(accounting.total.calls), String(accounting.total.cached),
        String(accounting.total.input_tokens), String(accounting.total.output_tokens), money(accounting.total.cost_usd)]]),
    { id: "cost" },
    2,
  );
  const transcripts = run.transcripts
    ? el("section", { id: "transcripts" }, el("h2", {}, "Transcripts"))
    : section("Transcripts", el("p", { class: "muted", id: "no-transcripts" },
      accounting ? "no transcripts.jsonl beside this run's results" : fitted));
  return [
    // in plain sentences (reports/ranking/sentences.py meaning): first here, above the browsing; the
    // static report and the terminal end with them
    section("What this means", ...run.meaning.map((sentence) => el("p", {}, sentence))),
    ...warnings(record),
    section("Leaderboard", styled ? el("p", { class: "muted", id: "held-equal" },
      `Elo with style held equal (${record.style.features.join(", ")}); change: places a model gains once style is held equal`) : null,
    styled ? el("p", { class: "muted", id: "style-assumption" }, STYLE_ASSUMPTION) : null,
    el("p", { class: "muted", id: "elo-rule" }, eloRule(record)),
    leaderboard, ...pairwise),
    // the baseline design's win rates, in the words and cells the server gives (reports/ranking/words.py)
    ...(run.baseline ? [section("Against the baseline", el("p", { class: "muted" }, run.baseline.title),
      table(run.baseline.columns, run.baseline.rows, { id: "baseline" }))] : []),
    ...(record.style ? [styleControl(record.style, record.settings.ci)] : []),
    section("Trust", el("p", { class: "muted" }, "how much each judge (row) trusts each evaluee (column)." +
      (record.trust_matrix && record.trust_matrix.rows.some((row) => row.every((v) => !v)) ? EMPTY_ROWS : "")),
      heatmap(record.trust_matrix)),
    section("Dispositions and lenses", lenses),
    section("Judges", judges),
    section("Cost by member and role", cost),
    transcripts,
  ];
}

// What style control assumes, as the static report and the terminal say it
// (reports/ranking/words.py STYLE_ASSUMPTION).
const STYLE_ASSUMPTION =
  "Elo with style held equal assumes that style reaches the verdicts only through the judges' taste: where longer " +
  "(or better formatted) replies really are better, holding style equal removes that substance too. " +
  "`eigenjury style-check RUN_DIR` measures each judge's taste on same-content edits of a rank run's replies, " +
  "beside the fitted coefficient.";

// Style control, in the words of the static report (reports/ranking/words.py): which reply a
// feature's coefficient favours, (positive, negative); other features by their name.
const STYLE_SIDES = {
  length: ["the longer reply", "the shorter reply"],
  headers: ["the reply with more headers", "the reply with fewer headers"],
  lists: ["the reply with more list items", "the reply with fewer list items"],
  bold: ["the reply with more bold spans", "the reply with fewer bold spans"],
};

function styleReading(c) {
  const [more, less] = STYLE_SIDES[c.feature] || [`the reply with the higher ${c.feature}`, `the reply with the lower ${c.feature}`];
  const side = c.coefficient > 0 ? more : less;
  const shared = c.judge === undefined || c.judge === null; // else the row names the judge
  // too small to show at two decimals, or an interval with no width: nothing measured it
  if (Math.abs(c.coefficient) < 0.005 || (c.ci && c.ci[0] === c.ci[1])) return "no effect measured";
  if (!c.ci) return `${shared ? "judges lean" : "leans"} to ${side} (no interval)`;
  return c.ci[0] > 0 || c.ci[1] < 0 ? `${shared ? "judges favour" : "favours"} ${side}` : "no clear effect";
}

function styleControl(style, ci) {
  const plus = (v) => (v > 0 ? `+${num(v, 2)}` : num(v, 2));
  const coefficient = (c) => (c.ci ? `${plus(c.coefficient)} [${plus(c.ci[0])}, ${plus(c.ci[1])}]` : plus(c.coefficient));
  const judged = style.per_judge ? ["judge"] : [];
  // no coefficients when every feature asked for was left out
  const coefficients = style.coefficients.length ? [
    el("p", { class: "muted" },
      "A coefficient is a judge's log-odds of preferring a reply, per standard deviation of the normalised difference " +
      "between the two replies; positive: judges favour the reply with more of it. Held equal: Elo comes from the fit " +
      "with the two replies' features set equal, so a model's rating owes nothing to these features. " +
      `Normalised difference: ${style.normalisation}.`),
    table([...judged, "feature", `coefficient ${sig(100 * ci)}%`, "reading"],
      style.coefficients.map((c) => [...(style.per_judge ? [c.judge] : []), c.feature, coefficient(c), styleReading(c)]),
      { id: "style" }, [0, judged.length, judged.length + 2]),
  ] : null;
  return section(
    "Style control",
    coefficients,
    Object.keys(style.dropped).length
      ? el("p", { class: "muted", id: "style-dropped" },
        `left out: ${Object.entries(style.dropped).map(([name, why]) => `${name} (${why})`).join("; ")}`)
      : null,
  );
}

// `eigenjury style-check`: each judge's taste for length on same-content edits, beside
// the run's fitted coefficient (reports/style_check.py prints the same).
function styleCheck(record, run) {
  const plus = (v) => (v === null || v === undefined ? "-" : v > 0 ? `+${num(v, 2)}` : num(v, 2));
  const open = (value, ci, unbounded) => {
    if (unbounded && ci) return `${unbounded} ${plus(unbounded === "above" ? ci[0] : ci[1])}`;
    if (value === null || value === undefined) return "-";
    if (!ci) return plus(value);
    return `${plus(value)} [${ci[0] === null ? "-∞" : plus(ci[0])}, ${ci[1] === null ? "∞" : plus(ci[1])}]`;
  };
  const pct = (v) => `${fixed(100 * v, 0)}%`;
  const share = (r) => (r.share_ci ? `${pct(r.share)} [${pct(r.share_ci[0])}, ${pct(r.share_ci[1])}]` : pct(r.share));
  const rows = [...record.judges, record.pooled].map((r) => [
    r.judge === null || r.judge === undefined ? "all judges, pooled" : r.judge,
    `${sig(r.longer)} / ${sig(r.shorter)} / ${sig(r.ties)}`,
    share(r),
    open(r.taste, r.taste_ci, r.unbounded),
    open(r.fitted, r.fitted_ci),
    open(r.difference, r.difference_ci),
    r.reading || "-",
  ]);
  const board = record.leaderboard;
  return [
    section("What this means", ...(run.meaning || []).map((sentence) => el("p", {}, sentence))),
    ...warnings(record),
    section("Taste for length",
      el("p", { class: "muted" },
        "taste: the log-odds a judge adds to the longer of two replies with the same content, per standard deviation " +
        `of normalised length difference (${sig(record.edits.scale)}, ${record.edits.scale_source}); share: ` +
        "verdicts for the longer reply, a tie counting half"),
      table(["judge", "longer / shorter / tie", "share for the longer", "taste", "fitted coefficient",
        "fitted minus taste", "reading"], rows, { id: "tastes" }, [0, 6])),
    board ? section("Elo with the length coefficient held at the measured taste",
      el("p", { class: "muted" }, `held: ${Object.entries(board.held).map(([k, v]) => `${k} ${plus(v)}`).join(", ")}; ` +
        "its intervals hold the taste at its estimate"),
      table(["rank", "model", "Elo at taste", "Elo controlled", "Elo uncontrolled"],
        board.models.map((m) => [String(m.rank), m.name, withOpenCi(m.elo, m.elo_ci, 0), num(m.elo_controlled, 0),
          num(m.elo_uncontrolled, 0)]), { id: "at-taste" }, 2)) : null,
  ];
}

const SLOT_BOUND = 15; // reports/ranking/words.py SLOT_BOUND
const bySlot = (j) => j.position_bias !== null && j.position_bias !== undefined && Math.abs(j.position_bias) >= SLOT_BOUND - 1e-6;

// the report's caption says the same (reports/ranking/words.py)
const EMPTY_ROWS = " Empty rows: members that never judge; they pass the trust that reaches them on " +
  "evenly to every evaluee (see the warnings).";

function heatmap(matrix) {
  if (!matrix || !matrix.rows) return el("p", { class: "muted" }, "no trust matrix");
  const high = Math.max(...matrix.rows.flat().filter((v) => v !== null), 1e-9);
  const rows = matrix.rows.map((row, i) =>
    el("tr", {}, el("td", { class: "l" }, matrix.judges[i]), row.map((v) => {
      const cell = el("td", {}, row.every((x) => !x) ? "-" : num(v, 3));
      if (v !== null) cell.style.backgroundColor = `rgba(36, 81, 179, ${(0.75 * v) / high})`;
      return cell;
    })),
  );
  return table(["judge \\ evaluee", ...matrix.evaluees], rows, { id: "trust", class: "heat" });
}

// --- a ranking run's transcripts ------------------------------------------------------

async function showTranscripts(params) {
  const box = document.getElementById("transcripts");
  if (!box) return;
  const query = new URLSearchParams(params);
  let data;
  try {
    data = await api(`/api/runs/${encodeURIComponent(current.id)}/transcripts?${query}`);
  } catch (error) { // a damaged transcript: the rest of the run stays on screen
    box.replaceChildren(el("h2", {}, "Transcripts"), el("p", { class: "warn" }, error.message));
    return;
  }
  if (!data.ready) {
    const share = data.bytes ? Math.floor((100 * data.bytes_read) / data.bytes) : 0;
    box.replaceChildren(el("h2", {}, "Transcripts"), el("p", { class: "muted", id: "indexing" }, `Indexing the transcripts… ${share}%`));
    const asked = location.hash; // ask again unless the user has moved on
    setTimeout(() => location.hash === asked && showTranscripts(params), 300);
    return;
  }
  const members = current.data.record.models.map((m) => m.name).sort();
  const filter = (name, label, options) => {
    const select = el(
      "select",
      { id: `f-${name}`, onchange: () => setFilter(name, select.value) },
      el("option", { value: "" }, "any"),
      options.map((o) => el("option", { value: o, selected: params.get(name) === o ? "" : null }, o)),
    );
    return el("label", {}, label, select);
  };
  const page = data.page;
  const pages = Math.max(1, Math.ceil(data.total / data.size));
  const turn = (to) => () => setFilter("page", String(to));
  box.replaceChildren(
    el("h2", {}, "Transcripts"),
    ...unreadable(data, "transcripts.jsonl", "t-unreadable"),
    el(
      "div",
      { class: "filters" },
      filter("judge", "judge", members),
      filter("evaluee", "evaluee", members),
      filter("scenario", "scenario", data.scenarios),
      filter("verdict", "verdict", data.verdicts),
    ),
    el(
      "div",
      { class: "pager" },
      el("button", { id: "prev", onclick: turn(page - 1), disabled: page <= 1 ? "" : null }, "← previous"),
      el("span", { id: "t-total" }, `${data.total} comparison${data.total === 1 ? "" : "s"}${data.repaired ? ` (${data.repaired} with a repair request)` : ""} · page ${page} of ${pages}`),
      el("button", { id: "next", onclick: turn(page + 1), disabled: page >= pages ? "" : null }, "next →"),
    ),
    ...data.items.map(comparisonCard),
  );
}

// Lines of a long file the index could not read: how many, and the first few named
// (a list of nodes to spread: none when every line was read).
function unreadable(data, file, id) {
  const n = data.unreadable_lines || 0;
  if (!n) return [];
  const more = n > data.unreadable.length ? "; …" : "";
  const lines = `${n} line${n > 1 ? "s" : ""} of ${file} could not be read and ${n > 1 ? "are" : "is"} left out`;
  return [el("p", { class: "warn", id }, `${lines}: ${data.unreadable.join("; ")}${more}`)];
}

function setFilter(name, value) {
  const [path, query] = location.hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  if (value) params.set(name, value);
  else params.delete(name);
  if (name !== "page") params.delete("page");
  location.hash = `${path}?${params}`;
}

const VERDICT_WORDS = { 0: "tie", 1: "first better", 2: "second better" };

// A judge's log-probabilities of its allowed answers as probabilities over them.
function labelProbabilities(logprobs) {
  const entries = Object.entries(logprobs);
  const top = Math.max(...entries.map(([, v]) => v));
  const total = entries.reduce((sum, [, v]) => sum + Math.exp(v - top), 0);
  return entries.map(([k, v]) => `${k} ${fixed(Math.exp(v - top) / total, 3)}`).join(", ");
}

function verdictWords(verdicts) {
  const said = (verdicts || []).map((v) => VERDICT_WORDS[v] || "unread");
  return said.length ? ` (verdict${said.length > 1 ? "s" : ""}: ${said.join(", ")})` : "";
}

function comparisonCard(item) {
  const verdicts = verdictWords(item.verdicts);
  const repair = item.repair;
  const side = (label, name, reply, reflection) =>
    el("div", {}, el("h4", {}, `${label}: ${name}`), pre(reply),
      reflection === null || reflection === undefined ? null : [el("h4", {}, `${item.judge}'s notes on ${name}`), pre(reflection)]);
  return el(
    "details",
    { class: "comparison" },
    el("summary", {}, `#${item.row + 1} ${item.judge} judges ${item.first} vs ${item.second} on ${item.scenario}`,
      tag(item.verdict), item.role === "repair" || repair ? tag("repair", "mixed") : null),
    item.question === null ? null : [el("h4", {}, "The message"), pre(item.question)],
    el("div", { class: "pair" },
      side("first", item.first, item.first_reply, item.first_reflection),
      side("second", item.second, item.second_reply, item.second_reflection)),
    // a given answer that lost by the config's answers rule: no call, no judge
    item.rule ? el("p", { class: "muted rule" }, `decided by the answers rule, with no call: ${item.rule}; ` +
      "counted in the win rates against the baseline, not in the fit") :
    item.scores ? [
      el("h4", {}, `${item.judge}'s likelihood verdict${verdicts}`),
      el("p", { class: "scores" }, `scores ${Object.entries(item.scores).map(([k, v]) => `${k} ${v >= 0 ? "+" : ""}${num(v, 4)}`).join(", ")}: ` +
        "how much likelier each reply is, per token, from a speaker who follows the constitution than from one who breaks it " +
        "(nats per token; scores, not probabilities). No prompt: the verdict is the higher score, from the judge's scoring calls."),
    ] : [el("h4", {}, `${item.judge}'s reply${verdicts}`), pre(item.reply)],
    item.choice_logprobs ? el("p", { class: "probs" }, `the judge's probabilities of its answers: ${labelProbabilities(item.choice_logprobs)}`) : null,
    item.failure && !repair ? el("p", { class: "warn failure" }, `no verdict counted: ${item.failure}`) : null,
    item.error ? el("p", { class: "warn error" }, `the call failed: ${item.error}`) : null,
    repair ? [
      el("h4", {}, `${item.judge}'s reply could not be read (${item.failure}); its reply to the repair request${verdictWords(repair.verdicts)}`),
      pre(repair.reply),
      repair.failure ? el("p", { class: "warn failure" }, `no verdict counted: ${repair.failure}`) : null,
      repair.error ? el("p", { class: "warn error" }, `the repair call failed: ${repair.error}`) : null,
    ] : null,
    item.unreadable ? el("p", { class: "warn unreadable" }, `not shown, could not be read: ${item.unreadable.join("; ")}`) : null,
    item.messages && item.messages.length ? el("details", {}, el("summary", {}, "the judge's prompt"),
      item.messages.map(([role, content]) => [el("h4", {}, role), pre(content)])) : null,
  );
}

// --- a grading run ----------------------------------------------------------------------

function gradingRun(record) {
  const said = current.data; // rows worded as the terminal and report.html word them
  const summary = table(said.summary.columns, said.summary.rows, { id: "summary" });
  const byTag = said.tags ? section("Scores by tag",
    el("p", { class: "muted" }, "A criterion tag: the scoring rule on the criteria carrying it; a task tag: the mean score of the tasks carrying it. 95% intervals over tasks; tasks in brackets."),
    table(said.tags.columns, said.tags.rows, { id: "tags" }, 2)) : null;
  const agreement = said.agreement ? section("Jurors",
    el("p", { class: "muted", id: "agreement" }, said.agreement.title),
    table(said.agreement.jurors.columns, said.agreement.jurors.rows, { id: "jurors" }, [0, said.agreement.jurors.columns.length - 1]),
    table(said.agreement.pairs.columns, said.agreement.pairs.rows, { id: "pairs" })) : null;
  const detail = el("div", { id: "task" });
  const tasks = table(
    ["task", "candidate", "score", "passed", "threshold", "split", "undecided", "pass chance", "jury cost", ""],
    record.tasks.map((t) => [
      t.task_id,
      t.candidate === null ? "-" : t.candidate,
      num(t.score, 1),
      tag(t.passed ? "pass" : "fail"),
      String(t.threshold),
      String(t.criteria.filter((c) => c.split).length),
      t.undecided === undefined ? "-" : t.undecided ? tag("undecided") : "no",
      t.pass_probability === undefined ? "-" : num(t.pass_probability, 2),
      money(t.jury_cost_usd),
      el("button", { class: "open-task", onclick: () => openTask(record, t, detail) }, "votes"),
    ]),
    { id: "tasks" },
    2,
  );
  const total = (record.accounting || {}).total || {};
  return [
    ...warnings(record),
    el("p", {}, `contract ${record.contract} · jurors ${record.jury.jurors.join(", ") || "none"} · cost ${money(total.cost_usd)}`),
    section("Candidates", summary),
    ...[byTag, agreement].filter(Boolean),
    section("Tasks", tasks, detail),
  ];
}

async function openTask(record, task, box) {
  const query = new URLSearchParams({ task: task.task_id });
  if (task.candidate !== null) query.set("candidate", task.candidate);
  let votes, answer;
  try {
    answer = await api(`/api/runs/${encodeURIComponent(current.id)}/votes?${query}`);
    ({ votes } = answer);
  } catch (error) { // a damaged trace: the task's table stays, the problem is named
    box.replaceChildren(el("p", { class: "warn", id: "votes-error" }, error.message));
    return;
  }
  const jurors = [...new Set([...record.jury.jurors, ...votes.filter((v) => v.juror).map((v) => v.juror)])];
  const cell = (criterion, juror) => { // a juror's repeats side by side
    // the deciding stage's answers only (a cascade's first jury is in the replies below)
    const found = votes.filter((v) => v.criterion_id === criterion && (juror === null ? v.juror === null : v.juror === juror && v.stage !== "first"));
    return el("td", { class: "vote" }, found.map((vote) => tag(vote.error ? "error" : vote.grade || "unparsed")));
  };
  const labels = current.data.labels || {}; // short labels of specs (names.short_labels)
  // a negative criterion is met (points lost) or not, as report.html words it
  const outcome = (c) => (c.weight < 0 ? (c.passed ? "met" : "not met") : c.passed ? "pass" : "fail");
  const share = (c) => (c.c_share === undefined ? "-"
    : `${Math.round(100 * c.c_share)}% C · p ${num(c.pass_probability, 2)}`);
  const grid = table(
    ["criterion", "grader", "weight", "passed", "C share · pass chance", "rule",
      ...jurors.map((j) => el("span", { title: j, class: "juror" }, labels[j] || j))],
    task.criteria.map((c) =>
      el("tr", { class: [c.split ? "split" : null, c.undecided ? "undecided" : null].filter(Boolean).join(" ") || null },
        el("td", { class: "l" }, c.id, c.undecided ? [" ", tag("undecided")] : null), el("td", { class: "l" }, c.grader),
        el("td", {}, String(c.weight)), el("td", {}, tag(outcome(c), c.passed === (c.weight >= 0) ? "pass" : "fail")),
        el("td", {}, share(c)), cell(c.id, null),
        jurors.map((j) => cell(c.id, j))),
    ),
    { id: "votes" },
    2,
  );
  const replies = votes.map((v) =>
    el("details", { class: "vote-reply" },
      el("summary", {}, `${v.criterion_id} · ${v.juror || v.stage}${v.repeat === undefined ? "" : ` (answer ${v.repeat + 1})`}${v.stage === "first" ? " · first jury" : ""}`, tag(v.error ? "error" : v.grade || "unparsed"),
        v.cost_usd === undefined ? null : el("span", { class: "muted" }, ` ${money(v.cost_usd)}`)),
      pre(v.text), v.retry_text ? [el("h4", {}, "after the retry"), pre(v.retry_text)] : null,
      v.error ? el("p", { class: "warn" }, v.error) : null),
  );
  box.replaceChildren(
    el("h3", {}, `${task.task_id} · ${task.candidate === null ? "" : task.candidate}`),
    ...unreadable(answer, "trace.jsonl", "votes-unreadable"),
    el("h4", {}, "Submission"), pre(task.submission),
    el("h4", {}, "Criterion × juror (split criteria highlighted, undecided ones marked)"), grid,
    el("div", { class: "votes" }, el("h4", {}, "Each vote in full"), replies),
  );
}

// --- a jury comparison, a certificate, a profile -----------------------------------------

function juryComparison(record) {
  const side = (measure, p) => estimate((record[measure] || {})[p]);
  const pools = table(["pool", "jurors", "split rate", "pass rate"],
    ["a", "b"].map((p) => [p, record.pools[p].jurors.join(", "), side("split_rate", p), side("pass_rate", p)]),
    { id: "pools" }, 2);
  const agreement = table(["measure", "value [interval]"], [
    ["criterion majority agreement", estimate(record.agreement)],
    // its base rate and kappa (reports/grading.py _beyond_chance); absent before 0.3.2
    ...(record.chance_agreement ? [
      ["by chance, at the pools' pass rates", estimate(record.chance_agreement)],
      record.kappa && record.kappa.value === null
        ? ["Cohen's kappa", "undefined: both pools gave every criterion the same outcome"]
        : ["Cohen's kappa (beyond chance)", estimate(record.kappa)],
    ] : []),
    ["agreement on common criteria", estimate(record.agreement_common)],
    ["identical task scores", estimate(record.identical_task_scores)],
    ["task pass agreement", estimate(record.task_pass_agreement)],
    ["task score Pearson", estimate(record.task_score_pearson)],
  ], { id: "agreement" });
  // per jury-graded criterion: each pool's cost, juror seconds and output tokens, and a / b
  const figures = [["cost_usd", "cost (USD)", 6], ["latency_s", "juror seconds", 2], ["output_tokens", "output tokens", 1]];
  const per = record.per_criterion || {};
  const relative = table(["per jury-graded criterion", "pool a", "pool b", "a relative to b"],
    figures.map(([key, label, digits]) => [label, estimate((per.a || {})[key], digits), estimate((per.b || {})[key], digits),
      estimate((record.a_relative_to_b || {})[key])]),
    { id: "figures" });
  const total = (record.accounting || {}).total || {};
  const incomplete = record.incomplete_submissions
    ? el("p", { class: "warn" }, `${record.incomplete_submissions} graded submission(s) rest on failed calls; rerun to try them again`)
    : null;
  const parts = [
    ...warnings(record),
    el("p", {}, `contract ${record.contract} · ${record.submissions} submissions · ${record.criteria} criteria · cost ${money(total.cost_usd)}`),
    record.note ? el("p", { class: "warn" }, record.note) : null,
    incomplete,
    section("Pools", pools), section("Agreement", agreement), section("Cost and speed", relative),
  ];
  const cascade = record.cascade;
  if (cascade) {
    const rows = Object.entries(cascade).filter(([, v]) => v && typeof v === "object" && "value" in v)
      .map(([k, v]) => [k, estimate(v)])
      .concat(Object.entries(cascade.relative_to_b || {}).map(([k, v]) => [`${k} relative to b`, estimate(v)]));
    parts.push(section(`Cascade: ${cascade.first} first, escalate to ${cascade.escalate_to}`,
      table(["measure", "value [interval]"], rows, { id: "cascade" })));
  }
  return parts.filter((part) => part !== null);
}

function generators(record, id) {
  const failures = (g) => Object.entries(g.failures || {}).map(([why, n]) => `${n} ${why}`).join(", ") || "0";
  // a certificate's generators count the failed neighbours kept as changes of 1
  const failed = (g) => g.failures ? failures(g) : `${g.failed || 0} (each a change of 1)`;
  return table(["generator", "estimate", "upper bound", "confidence", "beyond jitter", "m", "method", "failures"],
    Object.entries(record.generators || {}).map(([name, g]) =>
      [name, num(g.estimate, 4), num(g.upper_bound, 4), num(g.confidence, 2), num(g.beyond_jitter, 4), String(g.m),
        g.method || "-", failed(g)]),
    { id });
}

function certificate(record) {
  const numbers = ["tau", "delta", "dim", "sensitivity", "alpha", "sigma", "sigma_max", "threshold", "noise_radius", "smallest_feasible_tau"]
    .map((k) => [k, sig(record[k])]);
  // a score file without models has no model-level utility (null); tie_tolerance is a number
  const utility = Object.entries(record.utility || {}).filter(([, u]) => u && typeof u === "object").map(([level, u]) =>
    [level, num(u.pearson, 4), num(u.spearman, 4), num(u.kendall, 4)]);
  const tolerance = (record.utility || {}).tie_tolerance;
  const judge = record.profile || {};
  const stability = record.stability;
  const scale = (record.scores || {}).scale || {};
  // fields certificates before eigenjury 0.3 lack: k's source, the raw bound, no noise
  const k = [`neighbour size k = ${record.neighbour_size}`];
  if (record.k_source === "given") k.push(`given; the scores give ${record.k_derived}`);
  else if (record.k_source) k.push(record.k_source);
  if (record.k_unit) k.push(`largest: ${record.k_unit}`);
  return [
    ...warnings(record),
    el("p", { id: "guarantee" }, record.feasible ? tag("certified", "pass") : tag("infeasible", "fail"), " ", record.guarantee,
      record.deterministic ? " " : null, record.deterministic ? tag("no noise: deterministic shrinkage", "fail") : null),
    el("p", { class: "muted", id: "neighbour-size" }, k.join(" · ")),
    record.raw_bound === undefined ? null : el("p", { class: "muted", id: "raw-bound" },
      `tau on the judge's scale: ${sig(record.raw_bound)} points on ${scale.name} [${scale.low}, ${scale.high}]`),
    el("p", { class: "muted" }, `bounded: ${record.bounded}; not bounded: ${record.not_bounded}`),
    section("Certificate", table(["quantity", "value"], numbers, { id: "numbers" })),
    section("Sensitivity profile per generator",
      el("p", { class: "muted" }, `judge ${judge.judge} (${judge.protocol}) · m ${judge.m} · jitter ${num(judge.jitter, 4)}`),
      generators(record, "generators")),
    section("Utility retained", table(["level", "Pearson", "Spearman", "Kendall"], utility, { id: "utility" }),
      typeof tolerance === "number" ? el("p", { class: "muted", id: "tie-tolerance" },
        `model means closer than ${sig(tolerance)} count as ties (rounding, not signal)`) : null,
      stability ? table(["noise draws", "Kendall mean", "Kendall 5th percentile", "same top model"],
        [[String(stability.draws), num(stability.kendall_mean, 4), num(stability.kendall_p05, 4), num(stability.same_top_model, 2)]],
        { id: "stability" }, 0) : null),
  ];
}

function profile(record) {
  return [
    ...warnings(record),
    el("p", {}, `judge ${record.judge} · ${record.items} items · m ${record.m} · scale ${(record.scale || {}).name} · jitter ${num(record.jitter, 4)}`),
    section("Sensitivity per generator", generators(record, "generators")),
  ];
}
