// Small helpers to build the page's elements: text always goes in as
// textContent, never as markup.

export const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};

// clock writes a time of day, with the date when it is not today's.
export function clock(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const t = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  const today = new Date();
  if (d.toDateString() === today.toDateString()) return t;
  return `${d.toLocaleDateString([], { month: "short", day: "numeric" })} ${t}`;
}

// duration writes milliseconds as 850 ms, 4.2 s or 3 min 5 s.
export function duration(ms) {
  if (!(ms >= 0)) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const m = Math.floor(ms / 60000);
  return `${m} min ${Math.round((ms % 60000) / 1000)} s`;
}
