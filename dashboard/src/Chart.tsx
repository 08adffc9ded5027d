// A delivery chart, plain SVG under the page's CSP (attributes only, colours from the style
// sheet): per interval the attempts that succeeded, were retried and failed, stacked, and the
// p50 / p95 latency of the successful ones; the same numbers as a table for screen readers and
// for reading exact values. One webhook's, or the project's (webhookId null).
import { useRef, useState } from "preact/hooks";
import { loadChart, type ChartPoint, type ChartRange, type DeliveryChart } from "./api.ts";
import { fmtClock, fmtCount, fmtMs, message, usePoll } from "./ui.tsx";

const RANGES: { range: ChartRange; label: string; per: string }[] = [
  { range: "day", label: "24 hours", per: "hour" },
  { range: "week", label: "7 days", per: "6 hours" },
];

/** Width of one interval in the SVG's user units; heights are 0…100. */
const SLOT = 10;

export function DeliveryChartCard(props: {
  webhookId: string | null;
  title: string;
  idPrefix: string;
  /** changes when the caller saw deliveries change: the chart reads again at once */
  refreshKey?: string;
}) {
  const p = props.idPrefix;
  const [range, setRange] = useState<ChartRange>("day");
  const [chart, setChart] = useState<DeliveryChart | null>(null);
  const [error, setError] = useState<string | null>(null);
  const seq = useRef(0);

  const load = async () => {
    const n = ++seq.current;
    try {
      const c = await loadChart(props.webhookId, range);
      if (n !== seq.current) return;
      setChart(c);
      setError(null);
    } catch (err) {
      if (n === seq.current) setError(message(err));
    }
  };
  usePoll(load, 15_000, [props.webhookId, range, props.refreshKey]);

  const shown = chart?.range === range ? chart : null;
  const per = RANGES.find((r) => r.range === range)!.per;
  return (
    <section class="card chart-card" aria-labelledby={`${p}-title`} data-chart={props.webhookId ?? "project"} data-range={shown?.range}>
      <div class="section-head">
        <h3 id={`${p}-title`}>{props.title}</h3>
        <div class="segmented" role="group" aria-label={`${props.title}: period`}>
          {RANGES.map((r) => (
            <button key={r.range} type="button" aria-pressed={range === r.range ? "true" : "false"} onClick={() => setRange(r.range)}>
              {r.label}
            </button>
          ))}
        </div>
      </div>
      {error && (
        <p class="field-error" role="alert">
          Could not load the chart: {error}
        </p>
      )}
      {!shown ? (
        <p class="muted">Loading…</p>
      ) : (
        <>
          <dl class="facts chart-totals" data-totals>
            <div>
              <dt>
                <span class="swatch swatch-ok" aria-hidden="true" /> Succeeded
              </dt>
              <dd data-total="succeeded">{fmtCount(shown.totals.succeeded)}</dd>
            </div>
            <div>
              <dt>
                <span class="swatch swatch-retry" aria-hidden="true" /> Retried
              </dt>
              <dd data-total="retried">{fmtCount(shown.totals.retried)}</dd>
            </div>
            <div>
              <dt>
                <span class="swatch swatch-fail" aria-hidden="true" /> Failed
              </dt>
              <dd data-total="failed">{fmtCount(shown.totals.failed)}</dd>
            </div>
            <div>
              <dt>
                <span class="swatch swatch-p50" aria-hidden="true" /> p50 latency
              </dt>
              <dd data-total="p50">{fmtMs(shown.totals.p50Ms)}</dd>
            </div>
            <div>
              <dt>
                <span class="swatch swatch-p95" aria-hidden="true" /> p95 latency
              </dt>
              <dd data-total="p95">{fmtMs(shown.totals.p95Ms)}</dd>
            </div>
          </dl>
          <p class="hint">
            Delivery attempts per {per}, the last {RANGES.find((r) => r.range === range)!.label}: succeeded, retried (another attempt followed), failed
            (the delivery gave up). Latency is that of the successful attempts.
          </p>
          {shown.points.some((pt) => total(pt) > 0) ? (
            <>
              <Bars chart={shown} per={per} />
              <Latency chart={shown} />
              <Axis chart={shown} />
              <details class="chart-table">
                <summary>Show the numbers as a table</summary>
                <ChartTable chart={shown} />
              </details>
            </>
          ) : (
            <p class="muted chart-empty">No delivery attempts in the last {RANGES.find((r) => r.range === range)!.label}.</p>
          )}
        </>
      )}
    </section>
  );
}

const total = (pt: ChartPoint) => pt.succeeded + pt.retried + pt.failed;

const interval = (pt: ChartPoint, week: boolean) => `${fmtClock(pt.start, week)} – ${fmtClock(pt.end, week)}`;

function describePoint(pt: ChartPoint, week: boolean) {
  return `${interval(pt, week)}: ${pt.succeeded} succeeded, ${pt.retried} retried, ${pt.failed} failed; p50 ${fmtMs(pt.p50Ms)}, p95 ${fmtMs(pt.p95Ms)}`;
}

function Bars({ chart, per }: { chart: DeliveryChart; per: string }) {
  const week = chart.range === "week";
  const most = Math.max(1, ...chart.points.map(total));
  const width = chart.points.length * SLOT;
  const h = (n: number) => (n / most) * 100;
  const label = `Attempts per ${per}: ${chart.totals.succeeded} succeeded, ${chart.totals.retried} retried, ${chart.totals.failed} failed in all; at most ${most} in one ${per}.`;
  return (
    <div class="plot">
      <p class="plot-label" aria-hidden="true">
        attempts · most {fmtCount(most)} per {per}
      </p>
      <svg class="chart bars" viewBox={`0 0 ${width} 100`} preserveAspectRatio="none" role="img" aria-label={label}>
        <line class="baseline" x1="0" y1="100" x2={width} y2="100" vector-effect="non-scaling-stroke" />
        {chart.points.map((pt, i) => {
          const x = i * SLOT + 1;
          const ok = h(pt.succeeded);
          const retry = h(pt.retried);
          const fail = h(pt.failed);
          return (
            <g key={pt.start}>
              <title>{describePoint(pt, week)}</title>
              <rect class="bar-slot" x={i * SLOT} y="0" width={SLOT} height="100" />
              {ok > 0 && <rect class="bar-ok" x={x} y={100 - ok} width={SLOT - 2} height={ok} />}
              {retry > 0 && <rect class="bar-retry" x={x} y={100 - ok - retry} width={SLOT - 2} height={retry} />}
              {fail > 0 && <rect class="bar-fail" x={x} y={100 - ok - retry - fail} width={SLOT - 2} height={fail} />}
            </g>
          );
        })}
      </svg>
    </div>
  );
}

/** Runs of consecutive intervals that have a value, as polyline points; a lone value is a dash across its interval. */
function segments(points: ChartPoint[], pick: (p: ChartPoint) => number | null, y: (ms: number) => number): string[] {
  const runs: [number, number][][] = [];
  let run: [number, number][] | null = null;
  points.forEach((pt, i) => {
    const ms = pick(pt);
    if (ms === null) {
      run = null;
      return;
    }
    if (!run) runs.push((run = []));
    run.push([i * SLOT + SLOT / 2, y(ms)]);
  });
  return runs.map((r) => {
    const drawn = r.length > 1 ? r : [[r[0][0] - SLOT / 3, r[0][1]], [r[0][0] + SLOT / 3, r[0][1]]];
    return drawn.map(([x, yy]) => `${x},${yy.toFixed(2)}`).join(" ");
  });
}

function Latency({ chart }: { chart: DeliveryChart }) {
  const highest = Math.max(1, ...chart.points.map((p) => p.p95Ms ?? p.p50Ms ?? 0));
  const width = chart.points.length * SLOT;
  const y = (ms: number) => 100 - (ms / highest) * 95;
  const label =
    chart.totals.p50Ms === null
      ? "Latency of successful attempts: none succeeded in this period."
      : `Latency of successful attempts: p50 ${fmtMs(chart.totals.p50Ms)} and p95 ${fmtMs(chart.totals.p95Ms)} over the period, at most ${fmtMs(highest)} in one interval.`;
  return (
    <div class="plot">
      <p class="plot-label" aria-hidden="true">
        latency · up to {fmtMs(highest)}
      </p>
      <svg class="chart latency" viewBox={`0 0 ${width} 100`} preserveAspectRatio="none" role="img" aria-label={label}>
        <line class="baseline" x1="0" y1="100" x2={width} y2="100" vector-effect="non-scaling-stroke" />
        {segments(chart.points, (p) => p.p95Ms, y).map((pts) => (
          <polyline key={`p95-${pts}`} class="line-p95" points={pts} vector-effect="non-scaling-stroke" />
        ))}
        {segments(chart.points, (p) => p.p50Ms, y).map((pts) => (
          <polyline key={`p50-${pts}`} class="line-p50" points={pts} vector-effect="non-scaling-stroke" />
        ))}
      </svg>
    </div>
  );
}

function Axis({ chart }: { chart: DeliveryChart }) {
  const week = chart.range === "week";
  const mid = chart.points[Math.floor(chart.points.length / 2)];
  return (
    <p class="axis" aria-hidden="true">
      <span>{fmtClock(chart.from, week)}</span>
      <span>{fmtClock(mid.start, week)}</span>
      <span>now</span>
    </p>
  );
}

function ChartTable({ chart }: { chart: DeliveryChart }) {
  const week = chart.range === "week";
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            <th scope="col">Interval</th>
            <th scope="col">Succeeded</th>
            <th scope="col">Retried</th>
            <th scope="col">Failed</th>
            <th scope="col">p50</th>
            <th scope="col">p95</th>
          </tr>
        </thead>
        <tbody>
          {chart.points.map((pt) => (
            <tr key={pt.start}>
              <th scope="row">{interval(pt, week)}</th>
              <td>{fmtCount(pt.succeeded)}</td>
              <td>{fmtCount(pt.retried)}</td>
              <td>{fmtCount(pt.failed)}</td>
              <td>{fmtMs(pt.p50Ms)}</td>
              <td>{fmtMs(pt.p95Ms)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
