//! `cargo xtask trace-view DUMP [-o OUT.html]`: one self-contained HTML
//! timeline from a trace dump, and the browser check `cargo xtask test` runs.
//!
//! The input is either dump the crate writes: the text rows of
//! `trace::dump()` or the Chrome trace-event JSON of
//! `trace::dump_chrome_trace()` (told apart by the first non-blank byte).
//! Both become the same [`Timeline`]: per thread, callbacks
//! (`trampoline-entered`..`trampoline-left`) as bars, Win32 calls
//! (`syscall-enter`..`syscall-leave`) as thin call marks with their
//! duration, and every other record (arming, submitting, teardown steps) as
//! an instant mark. Text rows are paired exactly as the crate's own Chrome
//! renderer pairs them (per thread, innermost first; trampolines by target
//! and first slot, calls by name and first slot), so both inputs draw the
//! same picture.
//!
//! The page is one file with its data, CSS and script inline: no network
//! access, no external script, so it opens on an offline server. The script
//! draws SVG elements (one `rect.bar` per callback) and then records what it
//! drew on the root element (`data-bars`, `data-calls`, `data-marks`,
//! `data-status="drawn"`), which is what the browser check reads back from
//! `chromium --headless --dump-dom`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::env::Result;
use crate::json::{self, Json};

/// What one drawn element is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Callback,
    Call,
    Mark,
}

/// One element of the timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub kind: Kind,
    pub tid: u64,
    pub start_ns: u64,
    /// Zero for a mark.
    pub dur_ns: u64,
    pub name: String,
    /// The target (`work`, `timer`, ...; `syscall` for calls).
    pub cat: String,
    /// `end-missing` or `unfinished` when the slice's end was not recorded.
    pub flag: Option<&'static str>,
    pub slots: Vec<(String, String)>,
}

/// Everything the page shows.
#[derive(Debug, Default)]
pub struct Timeline {
    pub items: Vec<Item>,
    /// Header facts worth showing (filter, dropped records).
    pub notes: Vec<String>,
}

impl Timeline {
    pub fn count(&self, kind: Kind) -> usize {
        self.items.iter().filter(|i| i.kind == kind).count()
    }
}

/// Parses either dump format.
pub fn parse(text: &str) -> Result<Timeline> {
    match text.trim_start().as_bytes().first() {
        Some(b'{') => parse_chrome(text),
        Some(_) => parse_text(text),
        None => Err("the dump is empty".into()),
    }
}

/// A text row: `elapsed tid target event name=value ...`.
struct Row<'a> {
    ns: u64,
    tid: u64,
    target: &'a str,
    event: &'a str,
    slots: Vec<(&'a str, &'a str)>,
}

/// `S.NNNNNNNNN` seconds as nanoseconds, exactly.
fn seconds_ns(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_ns: u64 = format!("{frac:0<9}").parse().ok()?;
    int.parse::<u64>().ok()?.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// A JSON number of microseconds (`1234.567`) as nanoseconds, exactly to
/// the nanosecond.
fn micros_ns(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let frac = &frac[..frac.len().min(3)];
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_ns: u64 = format!("{frac:0<3}").parse().ok()?;
    int.parse::<u64>().ok()?.checked_mul(1000)?.checked_add(frac_ns)
}

fn parse_row(line: &str) -> Option<Row<'_>> {
    let mut words = line.split_whitespace();
    let ns = seconds_ns(words.next()?)?;
    let tid = words.next()?.parse().ok()?;
    let target = words.next()?;
    let event = words.next()?;
    let slots = words.map(|w| w.split_once('=')).collect::<Option<Vec<_>>>()?;
    Some(Row { ns, tid, target, event, slots })
}

/// A slice opened on a thread and not yet closed.
struct Open {
    call: bool,
    /// The target for a trampoline, the function for a call.
    key: String,
    first: Option<String>,
    item: Item,
}

pub fn parse_text(text: &str) -> Result<Timeline> {
    let mut tl = Timeline::default();
    let mut open: HashMap<u64, Vec<Open>> = HashMap::new();
    let mut last_ns = 0;
    let mut rows = 0usize;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(h) = line.strip_prefix('#') {
            let h = h.trim();
            if !h.starts_with("elapsed(s)") {
                tl.notes.push(h.to_string());
            }
            continue;
        }
        let row = parse_row(line).ok_or_else(|| format!("line {}: not a trace row: {line:?}", n + 1))?;
        rows += 1;
        last_ns = last_ns.max(row.ns);
        let slots: Vec<(String, String)> = row.slots.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let first = row.slots.first().map(|(_, v)| v.to_string());
        let (opens, call, key, name, cat) = match (row.target, row.event) {
            ("syscall-enter", f) => (true, true, f, f.to_string(), "syscall"),
            ("syscall-leave", f) => (false, true, f, f.to_string(), "syscall"),
            (t, "trampoline-entered") => (true, false, t, format!("{t} callback"), t),
            (t, "trampoline-left") => (false, false, t, format!("{t} callback"), t),
            (t, e) => {
                tl.items.push(Item {
                    kind: Kind::Mark,
                    tid: row.tid,
                    start_ns: row.ns,
                    dur_ns: 0,
                    name: format!("{t} {e}"),
                    cat: t.to_string(),
                    flag: None,
                    slots,
                });
                continue;
            }
        };
        let kind = if call { Kind::Call } else { Kind::Callback };
        let stack = open.entry(row.tid).or_default();
        if opens {
            let item =
                Item { kind, tid: row.tid, start_ns: row.ns, dur_ns: 0, name, cat: cat.into(), flag: None, slots };
            stack.push(Open { call, key: key.to_string(), first, item });
            continue;
        }
        match stack.iter().rposition(|o| o.call == call && o.key == key && o.first == first) {
            Some(p) => {
                // Anything opened after the match lost its end record.
                for (i, mut o) in stack.drain(p..).enumerate() {
                    o.item.dur_ns = row.ns.saturating_sub(o.item.start_ns);
                    if i > 0 {
                        o.item.flag = Some("end-missing");
                    }
                    tl.items.push(o.item);
                }
            }
            // Its start was dropped or cleared: an instant, as Perfetto shows it.
            None => tl.items.push(Item {
                kind: Kind::Mark,
                tid: row.tid,
                start_ns: row.ns,
                dur_ns: 0,
                name: format!("{} {}", row.target, row.event),
                cat: cat.into(),
                flag: None,
                slots,
            }),
        }
    }
    if rows == 0 && tl.notes.is_empty() {
        return Err("no trace rows and no header: not a windows-threadpool text dump".into());
    }
    for stack in open.into_values() {
        for mut o in stack {
            o.item.dur_ns = last_ns.saturating_sub(o.item.start_ns);
            o.item.flag = Some("unfinished");
            tl.items.push(o.item);
        }
    }
    tl.items.sort_by_key(|i| (i.start_ns, i.tid));
    Ok(tl)
}

/// An argument's value as the page shows it.
fn slot_text(v: &Json) -> String {
    match v {
        Json::Null => "null".into(),
        Json::Bool(b) => b.to_string(),
        Json::Num(s) | Json::Str(s) => s.clone(),
        Json::Arr(_) | Json::Obj(_) => "…".into(),
    }
}

pub fn parse_chrome(text: &str) -> Result<Timeline> {
    let root = json::parse(text).map_err(|e| format!("JSON: {e}"))?;
    let Some(Json::Arr(events)) = root.get("traceEvents") else {
        return Err("not a Chrome trace: no traceEvents array".into());
    };
    let mut tl = Timeline::default();
    if let Some(other) = root.get("otherData") {
        let dropped = other.get("dropped").map(slot_text).unwrap_or_default();
        if !dropped.is_empty() && dropped != "0" {
            tl.notes.push(format!("overflow: {dropped} records dropped"));
        }
    }
    for (n, e) in events.iter().enumerate() {
        let field = |k: &str| e.get(k).and_then(Json::as_text);
        let ph = field("ph").unwrap_or("");
        let kind = match ph {
            "X" if field("cat") == Some("syscall") => Kind::Call,
            "X" => Kind::Callback,
            "i" | "I" => Kind::Mark,
            _ => continue,
        };
        let bad = |what: &str| format!("traceEvents[{n}]: {what}");
        let tid = field("tid").and_then(|t| t.parse().ok()).ok_or_else(|| bad("no tid"))?;
        let start_ns = field("ts").and_then(micros_ns).ok_or_else(|| bad("no ts"))?;
        let dur_ns = match kind {
            Kind::Mark => 0,
            _ => field("dur").and_then(micros_ns).ok_or_else(|| bad("a slice without dur"))?,
        };
        let mut slots = Vec::new();
        let mut flag = None;
        if let Some(Json::Obj(args)) = e.get("args") {
            for (k, v) in args {
                match (k.as_str(), v) {
                    ("end-missing", Json::Bool(true)) => flag = Some("end-missing"),
                    ("unfinished", Json::Bool(true)) => flag = Some("unfinished"),
                    _ => slots.push((k.clone(), slot_text(v))),
                }
            }
        }
        tl.items.push(Item {
            kind,
            tid,
            start_ns,
            dur_ns,
            name: field("name").unwrap_or("?").to_string(),
            cat: field("cat").unwrap_or("").to_string(),
            flag,
            slots,
        });
    }
    tl.items.sort_by_key(|i| (i.start_ns, i.tid));
    Ok(tl)
}

/// `s` as a JSON string that is also safe inside a `<script>` element.
fn js_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The timeline's data as one JSON object the page's script reads.
fn data_json(tl: &Timeline, title: &str) -> String {
    let mut out = String::with_capacity(128 + tl.items.len() * 96);
    let mut tids: Vec<u64> = Vec::new();
    for i in &tl.items {
        if !tids.contains(&i.tid) {
            tids.push(i.tid);
        }
    }
    out.push_str("{\"title\":");
    js_str(&mut out, title);
    out.push_str(",\"notes\":[");
    for (n, note) in tl.notes.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        js_str(&mut out, note);
    }
    // Lanes in order of each thread's first record (the main thread first).
    let _ = write!(out, "],\"threads\":{tids:?},\"items\":[");
    for (n, i) in tl.items.iter().enumerate() {
        if n > 0 {
            out.push_str(",\n");
        }
        let kind = match i.kind {
            Kind::Callback => "b",
            Kind::Call => "c",
            Kind::Mark => "m",
        };
        let _ = write!(out, "[\"{kind}\",{},{},{},", i.tid, i.start_ns, i.dur_ns);
        js_str(&mut out, &i.name);
        out.push(',');
        js_str(&mut out, &i.cat);
        out.push(',');
        js_str(&mut out, i.flag.unwrap_or(""));
        out.push_str(",[");
        for (s, (k, v)) in i.slots.iter().enumerate() {
            if s > 0 {
                out.push(',');
            }
            out.push('[');
            js_str(&mut out, k);
            out.push(',');
            js_str(&mut out, v);
            out.push(']');
        }
        out.push_str("]]");
    }
    out.push_str("]}");
    out
}

const PAGE_CSS: &str = r##"
body{margin:0;font:13px system-ui,sans-serif;color:#222;background:#fafafa}
header{padding:6px 10px;border-bottom:1px solid #ccc;background:#fff}
header h1{font-size:15px;margin:0 0 2px}
header .help,header .notes{color:#555}
#status{font-weight:600}
#legend span{display:inline-block;margin-right:10px}
#legend i{display:inline-block;width:10px;height:10px;margin-right:3px;vertical-align:-1px}
svg{display:block;cursor:grab;user-select:none}
svg.dragging{cursor:grabbing}
.lane{fill:#fff;stroke:#e4e4e4}
.lane.odd{fill:#f4f6f8}
.label{font-size:12px;fill:#333}
.axis{font-size:10px;fill:#666}
.grid{stroke:#ddd}
.bar{stroke:#0003}
.bar.cut{stroke:#c00;stroke-dasharray:3 2}
.call{fill:#666}
.mark{stroke-width:2}
#tip{position:fixed;pointer-events:none;background:#fffffe;border:1px solid #999;padding:4px 6px;
 font:12px ui-monospace,monospace;white-space:pre;display:none;box-shadow:2px 2px 4px #0002;z-index:2}
"##;

const PAGE_JS: &str = r##"
(function(){
"use strict";
const D=JSON.parse(document.getElementById("data").textContent);
const NS="http://www.w3.org/2000/svg";
const LABEL=110,LANE=54,TOP=22;
const PALETTE={"work":"#4e79a7","timer":"#f28e2b","timer-periodic":"#59a14f","wait":"#e15759",
 "io":"#b07aa1","heal":"#9c755f","pool":"#76b7b2","group":"#edc948","exception":"#ff0000","syscall":"#666"};
function color(cat){if(PALETTE[cat])return PALETTE[cat];let h=0;for(const c of cat)h=(h*31+c.charCodeAt(0))>>>0;
 return "hsl("+(h%360)+",55%,50%)";}
function el(tag,attrs,parent){const e=document.createElementNS(NS,tag);for(const k in attrs)e.setAttribute(k,attrs[k]);
 if(parent)parent.appendChild(e);return e;}
const svg=document.getElementById("view");
const lane=new Map();D.threads.forEach((t,i)=>lane.set(t,i));
let t0=Infinity,t1=0;
for(const it of D.items){t0=Math.min(t0,it[2]);t1=Math.max(t1,it[2]+it[3]);}
if(!isFinite(t0)){t0=0;t1=1;}
if(t1<=t0)t1=t0+1;
const pad=(t1-t0)*0.01;const full=[t0-pad,t1+pad];
let view=full.slice();
const height=TOP+D.threads.length*LANE+4;
svg.setAttribute("height",height);
const gGrid=el("g",{},svg),gLanes=el("g",{},svg),gItems=el("g",{},svg),gLabels=el("g",{},svg);
D.threads.forEach((t,i)=>{
 el("rect",{class:"lane"+(i%2?" odd":""),x:0,y:TOP+i*LANE,height:LANE},gLanes);
 el("rect",{x:0,y:TOP+i*LANE,width:LABEL-4,height:LANE,fill:"#fafafa"},gLabels);
 const l=el("text",{class:"label",x:6,y:TOP+i*LANE+LANE/2+4},gLabels);l.textContent="thread "+t;
});
// Callbacks nest (a callback's own callbacks run inline rarely); calls stack under them.
const depth=new Map();
function nest(kind){const ends=new Map();
 for(let n=0;n<D.items.length;n++){const it=D.items[n];if(it[0]!==kind)continue;
  const st=ends.get(it[1])||[];while(st.length&&st[st.length-1]<=it[2])st.pop();
  depth.set(n,st.length);st.push(it[2]+it[3]);ends.set(it[1],st);}}
nest("b");nest("c");
const shapes=[];let bars=0,calls=0,marks=0;
D.items.forEach((it,n)=>{
 const y0=TOP+lane.get(it[1])*LANE;const d=depth.get(n)||0;let e;
 if(it[0]==="b"){e=el("rect",{class:"bar"+(it[6]?" cut":""),y:y0+4+Math.min(d,3)*3,height:22-Math.min(d,3)*3,
  fill:color(it[5])},gItems);bars++;}
 else if(it[0]==="c"){e=el("rect",{class:"call",y:y0+30+Math.min(d,2)*4,height:4},gItems);calls++;}
 else{e=el("line",{class:"mark",y1:y0+42,y2:y0+LANE-2,stroke:color(it[5])},gItems);marks++;}
 e.dataset.i=n;shapes.push([e,it]);
});
let gridLines=[];
function x(t,w){return LABEL+(t-view[0])/(view[1]-view[0])*(w-LABEL);}
function fmt(ns){const a=Math.abs(ns);if(a>=1e9)return (ns/1e9).toFixed(3)+" s";if(a>=1e6)return (ns/1e6).toFixed(3)+" ms";
 if(a>=1e3)return (ns/1e3).toFixed(1)+" \u00b5s";return ns+" ns";}
function W(){return Math.max(document.documentElement.clientWidth||1200,LABEL+100);}
function draw(){
 const w=W();
 svg.setAttribute("width",w);
 for(const r of gLanes.children)r.setAttribute("width",w);
 for(const [e,it] of shapes){const a=x(it[2],w);
  if(it[0]==="m"){e.setAttribute("x1",a);e.setAttribute("x2",a);}
  else{e.setAttribute("x",a);e.setAttribute("width",Math.max(x(it[2]+it[3],w)-a,it[0]==="b"?2:1));}}
 for(const g of gridLines)g.remove();gridLines=[];
 // Ticks at round times since the first record.
 const span=view[1]-view[0];let step=Math.pow(10,Math.floor(Math.log10(span/8)));
 if(span/step>40)step*=5;else if(span/step>16)step*=2;
 for(let k=Math.ceil((view[0]-t0)/step);t0+k*step<=view[1];k++){const t=t0+k*step,a=x(t,w);
  if(a<LABEL)continue;
  gridLines.push(el("line",{class:"grid",x1:a,x2:a,y1:TOP-4,y2:height},gGrid));
  const l=el("text",{class:"axis",x:a+2,y:TOP-8},gGrid);l.textContent=fmt(k*step);gridLines.push(l);}
}
function zoom(f,at){const w=W();const c=view[0]+(Math.max(at-LABEL,0)/(w-LABEL))*(view[1]-view[0]);
 let a=c-(c-view[0])*f,b=c+(view[1]-c)*f;if(b-a<50){return;}if(b-a>full[1]-full[0]){a=full[0];b=full[1];}
 view=[a,b];draw();}
svg.addEventListener("wheel",ev=>{ev.preventDefault();
 zoom(ev.deltaY>0?1.25:0.8,ev.clientX-svg.getBoundingClientRect().left);},{passive:false});
let drag=null;
svg.addEventListener("mousedown",ev=>{drag=[ev.clientX,view.slice()];svg.classList.add("dragging");});
window.addEventListener("mouseup",()=>{drag=null;svg.classList.remove("dragging");});
window.addEventListener("mousemove",ev=>{if(!drag)return;const w=W();
 const dt=(ev.clientX-drag[0])/(w-LABEL)*(drag[1][1]-drag[1][0]);view=[drag[1][0]-dt,drag[1][1]-dt];draw();});
window.addEventListener("keydown",ev=>{const w=W();
 if(ev.key==="+"||ev.key==="=")zoom(0.8,w/2);else if(ev.key==="-")zoom(1.25,w/2);
 else if(ev.key==="0"){view=full.slice();draw();}});
svg.addEventListener("dblclick",()=>{view=full.slice();draw();});
const tip=document.getElementById("tip");
svg.addEventListener("mousemove",ev=>{const n=ev.target.dataset&&ev.target.dataset.i;
 if(n===undefined||drag){tip.style.display="none";return;}const it=D.items[n];
 let s=it[4]+"\nthread "+it[1]+"\nat "+fmt(it[2]-t0);
 if(it[0]!=="m")s+="\nlasted "+fmt(it[3]);if(it[6])s+="\n("+it[6]+")";
 for(const [k,v] of it[7])s+="\n"+k+" = "+v;
 tip.textContent=s;tip.style.display="block";tip.style.left=(ev.clientX+12)+"px";tip.style.top=(ev.clientY+12)+"px";});
svg.addEventListener("mouseleave",()=>{tip.style.display="none";});
const cats=[...new Set(D.items.filter(i=>i[0]!=="c").map(i=>i[5]))].sort();
const legend=document.getElementById("legend");
for(const c of cats){const s=document.createElement("span");const i=document.createElement("i");i.style.background=color(c);
 s.appendChild(i);s.appendChild(document.createTextNode(c));legend.appendChild(s);}
draw();window.addEventListener("resize",draw);
const root=document.documentElement;
root.dataset.bars=bars;root.dataset.calls=calls;root.dataset.marks=marks;root.dataset.status="drawn";
// `#selftest`: drive the page's own handlers with synthetic events and say
// what they did (the browser check reads it back; a person never sees it).
if(location.hash==="#selftest"){
 const out=[];const r=svg.getBoundingClientRect();const y=r.top+TOP+LANE/2;
 const w0=view[1]-view[0];
 svg.dispatchEvent(new WheelEvent("wheel",{deltaY:-100,clientX:r.left+W()/2,clientY:y,bubbles:true,cancelable:true}));
 out.push(view[1]-view[0]<w0*0.9?"zoom ok":"zoom FAILED");
 const v0=view[0];
 svg.dispatchEvent(new MouseEvent("mousedown",{clientX:r.left+600,clientY:y,bubbles:true}));
 window.dispatchEvent(new MouseEvent("mousemove",{clientX:r.left+500,clientY:y}));
 window.dispatchEvent(new MouseEvent("mouseup",{}));
 out.push(view[0]>v0?"pan ok":"pan FAILED");
 view=full.slice();draw();
 const bar=gItems.querySelector(".bar");
 if(bar){bar.dispatchEvent(new MouseEvent("mousemove",{clientX:r.left+10,clientY:y,bubbles:true}));}
 out.push(tip.style.display==="block"&&/callback/.test(tip.textContent)&&/ = /.test(tip.textContent)?"hover ok":"hover FAILED");
 root.dataset.selftest=out.join(", ");
}
document.getElementById("status").textContent=bars+" callbacks, "+calls+" calls, "+marks+" marks on "+D.threads.length+" threads";
})();
"##;

/// The whole page: data, style and script inline.
pub fn render_html(tl: &Timeline, title: &str) -> String {
    let data = data_json(tl, title);
    let notes = tl.notes.iter().map(|n| html_escape(n)).collect::<Vec<_>>().join(" · ");
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'\">\n\
         <title>{t} - windows-threadpool timeline</title>\n<style>{PAGE_CSS}</style></head>\n<body>\n\
         <header><h1>{t}</h1><div class=\"notes\">{notes}</div>\
         <div><span id=\"status\">drawing…</span> · <span id=\"legend\"></span></div>\
         <div class=\"help\">Bars: callbacks. Grey strips: Win32 calls. Ticks: other records (arming, submitting, teardown). \
         Hover for the named slots; wheel or +/- to zoom, drag to pan, double-click or 0 to reset.</div></header>\n\
         <svg id=\"view\" xmlns=\"http://www.w3.org/2000/svg\" width=\"1200\"></svg><div id=\"tip\"></div>\n\
         <script type=\"application/json\" id=\"data\">{data}</script>\n<script>{PAGE_JS}</script>\n</body></html>\n",
        t = html_escape(title),
    )
}

/// `cargo xtask trace-view DUMP [-o OUT]`.
pub fn trace_view(rest: &[String]) -> Result<()> {
    let usage = "usage: cargo xtask trace-view DUMP [-o OUT.html]  (DUMP: trace::dump() text or trace::dump_chrome_trace() JSON)";
    let (mut input, mut output) = (None, None);
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-o" | "--output" => output = Some(it.next().ok_or(usage)?.clone()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}\n{usage}")),
            _ if input.is_none() => input = Some(a.clone()),
            _ => return Err(usage.into()),
        }
    }
    let input = crate::env::invocation_dir().join(input.ok_or(usage)?);
    let output = match output {
        Some(o) => crate::env::invocation_dir().join(o),
        None => input.with_extension("html"),
    };
    let tl = write_page(&input, &output)?;
    println!(
        "trace-view: wrote {} ({} callbacks, {} calls, {} marks)",
        output.display(),
        tl.count(Kind::Callback),
        tl.count(Kind::Call),
        tl.count(Kind::Mark)
    );
    Ok(())
}

/// Reads the dump at `input` and writes its page to `output`.
pub fn write_page(input: &Path, output: &Path) -> Result<Timeline> {
    let text = std::fs::read_to_string(input).map_err(|e| format!("read {}: {e}", input.display()))?;
    let tl = parse(&text).map_err(|e| format!("{}: {e}", input.display()))?;
    let title = input.file_name().map_or_else(|| "trace".into(), |n| n.to_string_lossy().into_owned());
    std::fs::write(output, render_html(&tl, &title)).map_err(|e| format!("write {}: {e}", output.display()))?;
    Ok(tl)
}

/// The `file://` URL of an absolute path.
pub fn file_url(path: &Path) -> String {
    let p = path.to_string_lossy().replace('\\', "/");
    let p = if p.starts_with('/') { p } else { format!("/{p}") };
    let mut out = String::from("file://");
    for b in p.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' | b':' => out.push(b as char),
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

/// The value of `data-NAME="..."` on the dumped DOM's root element.
pub fn root_data(dom: &str, name: &str) -> Option<String> {
    let start = dom.find("<html")?;
    let tag = &dom[start..start + dom[start..].find('>')?];
    let pat = format!(" data-{name}=\"");
    let v = &tag[tag.find(&pat)? + pat.len()..];
    Some(v[..v.find('"')?].to_string())
}

/// How many drawn elements of `class` the dumped DOM holds.
pub fn count_class(dom: &str, tag: &str, class: &str) -> usize {
    dom.match_indices(&format!("<{tag} class=\"{class}")).count()
}

/// Where the outputs of the browser check go.
pub fn scratch_dir() -> Result<PathBuf> {
    let dir = crate::env::layout()?.target_dir.join("xtask").join("timeline");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# windows-threadpool trace: filter \"*\", 9 records, capacity 262144
#   elapsed(s) thread target event slots
   0.000000000    412 syscall-enter CreateThreadpoolWork context=0x2a1c40 environment=0x0
   0.000021300    412 syscall-leave CreateThreadpoolWork context=0x2a1c40 environment=0x0
   0.000022100    412 work created work=0x2a1d10 context=0x2a1c40
   0.000071200    436 wait trampoline-entered wait=0x2a1d10 timed_out=0
   0.000071500    436 syscall-enter SetThreadpoolWait wait=0x2a1d10 handle=4
   0.000071900    436 syscall-leave SetThreadpoolWait wait=0x2a1d10 handle=4
   0.000072000    436 wait trampoline-left wait=0x2a1d10
   0.000073000    436 work trampoline-left work=0x99
   0.000080000    440 work trampoline-entered work=0x2a1d10
   0.000080300    412 work drained work=0x2a1d10 cancelled=0
";

    #[test]
    fn text_rows_pair_into_callbacks_calls_and_marks() {
        let tl = parse(TEXT).unwrap();
        assert_eq!(tl.notes, ["windows-threadpool trace: filter \"*\", 9 records, capacity 262144"]);
        let cb: Vec<_> = tl.items.iter().filter(|i| i.kind == Kind::Callback).collect();
        assert_eq!(cb.len(), 2);
        assert_eq!((cb[0].name.as_str(), cb[0].tid, cb[0].start_ns, cb[0].dur_ns), ("wait callback", 436, 71_200, 800));
        assert_eq!(cb[0].slots, [("wait".into(), "0x2a1d10".into()), ("timed_out".into(), "0".into())]);
        // Still running when the dump was taken: extends to the last record.
        assert_eq!((cb[1].start_ns, cb[1].dur_ns, cb[1].flag), (80_000, 300, Some("unfinished")));
        let calls: Vec<_> = tl.items.iter().filter(|i| i.kind == Kind::Call).collect();
        assert_eq!(calls.len(), 2);
        assert_eq!((calls[1].name.as_str(), calls[1].dur_ns), ("SetThreadpoolWait", 400));
        // Created, drained, and a left whose entered is missing.
        let marks: Vec<_> = tl.items.iter().filter(|i| i.kind == Kind::Mark).map(|i| i.name.as_str()).collect();
        assert_eq!(marks, ["work created", "work trampoline-left", "work drained"]);
    }

    #[test]
    fn a_lost_end_is_flagged_and_closed_by_the_outer_end() {
        let text = "   0.000000100 7 work trampoline-entered work=0x1\n   0.000000200 7 syscall-enter NtReadFile handle=3\n   \
                    0.000000900 7 work trampoline-left work=0x1\n";
        let tl = parse(text).unwrap();
        let flags: Vec<_> = tl.items.iter().map(|i| (i.kind, i.dur_ns, i.flag)).collect();
        assert_eq!(flags, [(Kind::Callback, 800, None), (Kind::Call, 700, Some("end-missing"))]);
    }

    #[test]
    fn the_chrome_json_gives_the_same_items() {
        let json = r#"{"displayTimeUnit":"ns","otherData":{"dropped":3,"capacity":4},"traceEvents":[
{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"windows-threadpool trace"}},
{"name":"CreateThreadpoolWork","cat":"syscall","ph":"X","pid":1,"tid":412,"ts":0.000,"dur":21.300,"args":{"context":"0x2a1c40"}},
{"name":"work created","cat":"work","ph":"i","pid":1,"tid":412,"ts":22.100,"s":"t","args":{"work":"0x2a1d10","n":5}},
{"name":"wait callback","cat":"wait","ph":"X","pid":1,"tid":436,"ts":71.200,"dur":0.800,"args":{"wait":"0x2a1d10","timed_out":0,"unfinished":true}}
]}"#;
        let tl = parse(json).unwrap();
        assert_eq!(tl.notes, ["overflow: 3 records dropped"]);
        assert_eq!(tl.items.len(), 3);
        let cb = &tl.items[2];
        assert_eq!(
            (cb.kind, cb.tid, cb.start_ns, cb.dur_ns, cb.flag),
            (Kind::Callback, 436, 71_200, 800, Some("unfinished"))
        );
        assert_eq!(cb.slots, [("wait".into(), "0x2a1d10".into()), ("timed_out".into(), "0".into())]);
        assert_eq!((tl.items[0].kind, tl.items[0].dur_ns), (Kind::Call, 21_300));
        assert_eq!(tl.items[1].slots[1], ("n".into(), "5".into()));
    }

    #[test]
    fn bad_input_is_refused_with_where() {
        assert!(parse("").is_err());
        assert!(parse("hello world\n").unwrap_err().contains("line 1"));
        assert!(parse("{\"traceEvents\":[}").is_err());
        assert!(parse("{\"x\":1}").unwrap_err().contains("traceEvents"));
    }

    #[test]
    fn json_strings_and_numbers_parse_exactly() {
        let v = json::parse(r#"{"a":"x\"\u00e9\ud83d\ude00","b":[1.250,-2e3,true,null]}"#).unwrap();
        assert_eq!(v.get("a"), Some(&Json::Str("x\"é😀".into())));
        assert_eq!(
            v.get("b"),
            Some(&Json::Arr(vec![Json::Num("1.250".into()), Json::Num("-2e3".into()), Json::Bool(true), Json::Null]))
        );
        assert_eq!(micros_ns("1234.567"), Some(1_234_567));
        assert_eq!(micros_ns("2.6"), Some(2_600));
        assert_eq!(seconds_ns("1.000000002"), Some(1_000_000_002));
    }

    /// The shared parser (`tests/support/json.rs`), natively: what the
    /// tests' own check refuses, and what else strict JSON does.
    #[test]
    fn json_is_refused_unless_strict() {
        let refused = [
            "{",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "[1] x",
            "\"\n\"",
            "01x",
            "{\"a\":1,\"a\":2}",
            "-",
            "1.",
            // Leading zero, bad escape, lone or reversed surrogates, short hex.
            "01",
            "-00.5",
            r#""\x""#,
            r#""\ud83d""#,
            r#""\ud83dx""#,
            r#""\ude00""#,
            r#""\ud83d\u0041""#,
            r#""\u12""#,
            r#""\u12g4""#,
            "+1",
            ".5",
            "1e",
            "tru",
            "nul",
        ];
        for bad in refused {
            assert!(json::parse(bad).is_err(), "{bad:?} should not parse");
        }
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(json::parse(&deep(json::MAX_DEPTH)).is_ok());
        assert!(json::parse(&deep(json::MAX_DEPTH + 1)).unwrap_err().contains("too deep"));
        assert!(json::parse(&deep(100_000)).is_err(), "deep nesting is refused, not a stack overflow");
        // Members keep their order; numbers their text.
        let v = json::parse(r#" {"z":0,"a":-0.5e+2,"m":{"b":[]}} "#).unwrap();
        let Json::Obj(members) = &v else { panic!("{v:?}") };
        assert_eq!(members.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["z", "a", "m"]);
        assert_eq!(
            (v.get("a").and_then(Json::as_text), v.get("a").and_then(Json::as_f64)),
            (Some("-0.5e+2"), Some(-50.0))
        );
        assert_eq!(v.get("z").and_then(Json::as_u64), Some(0));
        assert_eq!(json::parse(r#""\/\b\f\n\r\t\u0041""#), Ok(Json::Str("/\u{8}\u{c}\n\r\tA".into())));
    }

    #[test]
    fn the_page_is_self_contained_and_its_data_cannot_close_the_script() {
        let mut tl = parse(TEXT).unwrap();
        tl.items[0].slots.push(("evil".into(), "</script><script src=\"http://x\">".into()));
        let html = render_html(&tl, "a<b>.txt");
        assert_eq!(html.matches("</script>").count(), 2, "only the two inline scripts close");
        assert_eq!(html.matches("<script").count(), 2, "the data opened no element");
        for external in ["<script src", "<link", "<img", "<iframe", "@import", "url(", "fetch(", "https://"] {
            assert!(!html.contains(external), "{external} in the page");
        }
        assert!(html.contains("<title>a&lt;b&gt;.txt"));
        assert!(html.contains("default-src 'none'"));
    }

    #[test]
    fn dom_dump_is_read_back() {
        let dom = r#"<html lang="en" data-bars="12" data-status="drawn"><body><svg><rect class="bar" x="1"></rect><rect class="bar cut"></rect><rect class="call"></rect>"#;
        assert_eq!(root_data(dom, "bars").as_deref(), Some("12"));
        assert_eq!(root_data(dom, "status").as_deref(), Some("drawn"));
        assert_eq!(root_data(dom, "marks"), None);
        assert_eq!(count_class(dom, "rect", "bar"), 2);
        assert_eq!(file_url(Path::new("/a b/c.html")), "file:///a%20b/c.html");
        assert_eq!(file_url(Path::new(r"C:\x\y.html")), "file:///C:/x/y.html");
    }
}
