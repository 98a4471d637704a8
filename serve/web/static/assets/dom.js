// Small helpers to build the page's elements: text always goes in as
// textContent, never as markup.

export const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};

// Formatters are made once: making one per call (what toLocaleTimeString
// with options does) costs a third of a millisecond, which a history of
// thousands of messages pays thousands of times.
const timeFormat = new Intl.DateTimeFormat([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
const dayFormat = new Intl.DateTimeFormat([], { month: "short", day: "numeric" });
export const fullFormat = new Intl.DateTimeFormat([], { dateStyle: "full", timeStyle: "long" });

// clock writes a time of day, with the date when it is not today's.
export function clock(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const t = timeFormat.format(d);
  const now = new Date();
  if (d.getFullYear() === now.getFullYear() && d.getMonth() === now.getMonth() && d.getDate() === now.getDate()) return t;
  return `${dayFormat.format(d)} ${t}`;
}

// duration writes milliseconds as 850 ms, 4.2 s or 3 min 5 s.
export function duration(ms) {
  if (!(ms >= 0)) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const m = Math.floor(ms / 60000);
  return `${m} min ${Math.round((ms % 60000) / 1000)} s`;
}
