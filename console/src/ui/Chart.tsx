/**
 * A horizontal bar chart without a library: one row per group with its label, an SVG bar
 * (its width a percentage attribute, which the CSP allows where an inline style would not)
 * and its value.
 */
export function BarChart({ bars, unit }: { bars: { label: string; value: number }[]; unit: "tokens" | "cost" | "turns" }) {
  const max = Math.max(...bars.map((bar) => bar.value), 0) || 1;
  const format = (value: number): string =>
    unit === "cost" ? `$${value.toFixed(value < 1 ? 4 : 2)}` : value >= 10_000 ? `${Math.round(value / 1000)}k` : String(value);
  return (
    <figure class="chart" aria-label={`Usage by group, in ${unit}`}>
      <table class="chart-rows">
        <tbody>
          {bars.map((bar) => (
            <tr key={bar.label}>
              <th scope="row" class="chart-label">{bar.label}</th>
              <td class="chart-bar-cell">
                <svg class="chart-bar" width="100%" height="16" aria-hidden="true" focusable="false">
                  <rect x="0" y="0" height="16" rx="3" width={`${Math.max((100 * bar.value) / max, 0.5)}%`} />
                </svg>
              </td>
              <td class="chart-value">{format(bar.value)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </figure>
  );
}
