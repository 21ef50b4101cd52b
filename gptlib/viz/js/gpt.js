// The course GPT's forward pass in the page (Lecture 5), read beside gptlib/model.py: one function per
// definition, flat typed arrays with their shapes in comments, a key/value cache, as llama2.c's run.c.
// No dependency, nothing fetched but the weights file the caller names.
//
//   readWeights(buffer, expected?)   a weights file (gptlib.viz.page_weights) -> model, or WeightsError
//   fetchWeights(url, expected?)     the same, fetched
//   encode(model, text)              characters -> Int32Array of ids, or TextError in the kernel's words
//   new Session(model).run(tokens)   -> Run: logits, every A^h, every write into the residual stream;
//                                    a text that extends the last one costs only its new positions
//   writeLabels(config)              the writes' labels, as gptlib.analysis.decomposition names them
//   directContributions(model, run, position, token, against?)  decomposition's direct logit attribution
//   writeRows(run, position, config), writeNorms(run, l)  each write's row; each head's write length
//
// Feature vectors are rows, as in model.py: a sequence is X (T, d), stored row after row. Weights keep
// state_dict's names and shapes; a matrix that multiplies rows from the right (W_Q^h, W_O^h, W_U) is
// also kept transposed, so that every output entry is a dot product of two contiguous rows (matmulT).
// Arithmetic is JavaScript's float64, in Float64Arrays; what a Run hands out is rounded to Float32Arrays.

export class WeightsError extends Error {
  constructor(message) {
    super(message);
    this.name = "WeightsError";
  }
}

export class TextError extends Error {
  constructor(message) {
    super(message);
    this.name = "TextError";
  }
}

// ---------------------------------------------------------------------------------------------------
// The weights file: "GPTW", uint32 header length n, n bytes of UTF-8 JSON, zeros to a multiple of 4,
// then each tensor's float32 values, little-endian, in the header's order (gptlib/viz/page_weights.py).

const MAGIC = "GPTW";
const FORMAT = 1;
const NORMS = ["pre", "post"];

// buffer: the file's bytes, an ArrayBuffer or a view of one (a Uint8Array, or the DataView anywidget hands a
// binary trait as; copied then, so that every tensor is 4-byte aligned). expected: null, or the config fields
// an explorer was built for. -> the model: {config, vocabulary, courseVocabulary, tensors, ...}.
export function readWeights(buffer, expected = null) {
  if (ArrayBuffer.isView(buffer)) buffer = buffer.buffer.slice(buffer.byteOffset, buffer.byteOffset + buffer.byteLength);
  if (!(buffer instanceof ArrayBuffer)) {
    const got = buffer === null || buffer === undefined ? String(buffer) : buffer.constructor?.name ?? typeof buffer;
    throw new WeightsError(`the weights must be the bytes of a weights file (an ArrayBuffer), got ${got}`);
  }
  if (buffer.byteLength === 0) throw new WeightsError("the weights file is empty (0 bytes)");
  const bytes = new Uint8Array(buffer);
  if (String.fromCharCode(...bytes.subarray(0, 4)) !== MAGIC.slice(0, Math.min(4, bytes.length))) {
    throw new WeightsError(`the file is not a gptlib weights file: it does not start with "${MAGIC}"`);
  }
  if (bytes.length < 8) throw new WeightsError(`the weights file is truncated: it ends at byte ${bytes.length} of its first 8`);
  const headerLength = new DataView(buffer).getUint32(4, true);
  if (8 + headerLength > bytes.length) {
    throw new WeightsError(`the weights file is truncated: its header claims ${headerLength} bytes, ` +
                           `${bytes.length - 8} follow`);
  }
  let header;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(8, 8 + headerLength)));
  } catch {
    throw new WeightsError("the weights file is corrupted: its header is not UTF-8 JSON");
  }
  if (header === null || typeof header !== "object" || header.format !== FORMAT) {
    throw new WeightsError(`the weights file has format ${JSON.stringify(header?.format)}; this page reads format ${FORMAT}`);
  }
  const config = checkedConfig(header.config);
  if (expected !== null) sameConfig(config, expected);
  const vocabulary = checkedVocabulary(header.vocabulary, "vocabulary", config.V);
  const courseVocabulary = checkedVocabulary(header.course_vocabulary, "course_vocabulary", null);
  if (!courseVocabulary.startsWith(vocabulary)) {
    throw new WeightsError("the weights file is corrupted: its vocabulary is not the course's first V characters");
  }
  const start = 4 * Math.ceil((8 + headerLength) / 4); // the data, after the zero padding
  const tensors = checkedTensors(header.tensors, config, buffer, start);
  return assemble(config, vocabulary, courseVocabulary, tensors);
}

export async function fetchWeights(url, expected = null) {
  let response;
  try {
    response = await fetch(url);
  } catch {
    throw new WeightsError(`the weights file ${url} could not be fetched`);
  }
  if (!response.ok) throw new WeightsError(`the weights file ${url} is missing (HTTP ${response.status})`);
  return readWeights(await response.arrayBuffer(), expected);
}

// The config as GPTConfig checks it (gptlib/config.py), with d_head = d / H derived.
function checkedConfig(raw) {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    throw new WeightsError("the weights file is corrupted: its header holds no config");
  }
  const config = {};
  for (const name of ["V", "T_max", "d", "H", "L", "d_ff"]) {
    if (!Number.isSafeInteger(raw[name]) || raw[name] < 1) {
      throw new WeightsError(`the weights file's config is invalid: ${name} must be a whole number >= 1, ` +
                             `got ${JSON.stringify(raw[name])}`);
    }
    config[name] = raw[name];
  }
  if (config.d % config.H !== 0) {
    throw new WeightsError(`the weights file's config is invalid: H = ${config.H} does not divide d = ${config.d}`);
  }
  for (const name of ["tie_weights", "causal", "attn_only"]) {
    if (typeof raw[name] !== "boolean") {
      throw new WeightsError(`the weights file's config is invalid: ${name} must be true or false, ` +
                             `got ${JSON.stringify(raw[name])}`);
    }
    config[name] = raw[name];
  }
  if (!NORMS.includes(raw.norm) || (raw.attn_only && raw.norm !== "pre")) {
    throw new WeightsError(`the weights file's config is invalid: norm must be "pre" or "post" ("pre" when ` +
                           `attn_only), got ${JSON.stringify(raw.norm)}`);
  }
  if (typeof raw.ln_eps !== "number" || !(raw.ln_eps > 0) || !Number.isFinite(raw.ln_eps)) {
    throw new WeightsError("the weights file's config is invalid: ln_eps must be a finite number > 0, " +
                           `got ${JSON.stringify(raw.ln_eps)}`);
  }
  config.norm = raw.norm;
  config.ln_eps = raw.ln_eps;
  config.d_head = config.d / config.H;
  return config;
}

// Another model's file: `expected` holds the sizes and switches an explorer was built for (a GPTConfig's
// fields; those the forward pass does not read, such as init_std, are not compared), as in
// checkpoint.load_weights_into.
function sameConfig(config, expected) {
  const differences = Object.keys(expected).filter((name) => name in config && expected[name] !== config[name])
    .map((name) => `${name} ${JSON.stringify(config[name])} (file) vs ${JSON.stringify(expected[name])} (expected)`);
  if (differences.length) {
    throw new WeightsError(`the weights file is of another model: its config differs in ${differences.join(", ")}`);
  }
}

function checkedVocabulary(raw, name, V) {
  const characters = typeof raw === "string" ? Array.from(raw) : null;
  if (characters === null || new Set(characters).size !== characters.length || (V !== null && characters.length !== V)) {
    const size = V === null ? "distinct characters" : `V = ${V} distinct characters`;
    throw new WeightsError(`the weights file is corrupted: its ${name} is not ${size}`);
  }
  return raw;
}

// The weights a GPT of this config has, name -> shape: the names and order of GPT(config).state_dict().
function expectedShapes(c) {
  const shapes = [["E", [c.V, c.d]], ["P", [c.T_max, c.d]]];
  if (!c.tie_weights) shapes.push(["W_U", [c.d, c.V]]);
  for (let l = 0; l < c.L; l++) {
    const b = `blocks.${l}.`;
    shapes.push([b + "ln_1.gamma", [c.d]], [b + "ln_1.beta", [c.d]]);
    for (const W of ["W_Q", "W_K", "W_V"]) shapes.push([b + "attn." + W, [c.H, c.d, c.d_head]]);
    shapes.push([b + "attn.W_O", [c.d, c.d]], [b + "attn.b_O", [c.d]]);
    if (!c.attn_only) {
      shapes.push([b + "ln_2.gamma", [c.d]], [b + "ln_2.beta", [c.d]]);
      shapes.push([b + "mlp.W_1", [c.d_ff, c.d]], [b + "mlp.b_1", [c.d_ff]]);
      shapes.push([b + "mlp.W_2", [c.d, c.d_ff]], [b + "mlp.b_2", [c.d]]);
    }
  }
  shapes.push(["ln_f.gamma", [c.d]], ["ln_f.beta", [c.d]]);
  return new Map(shapes);
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function checkedTensors(entries, config, buffer, start) {
  if (!Array.isArray(entries)) throw new WeightsError("the weights file is corrupted: its header lists no tensors");
  const names = entries.map((entry) => entry?.name), listed = new Set();
  for (const name of names) {
    if (listed.has(name)) throw new WeightsError(`the weights file is corrupted: it lists weight ${name} twice`);
    listed.add(name);
  }
  const count = 4 + (config.tie_weights ? 0 : 1) + config.L * (config.attn_only ? 7 : 13); // before listing L blocks
  if (entries.length !== count) {
    throw new WeightsError(`the weights do not match the config: it needs ${count} weights, the file lists ${entries.length}`);
  }
  const expected = expectedShapes(config);
  const missing = [...expected.keys()].filter((name) => !listed.has(name));
  const unexpected = names.filter((name) => !expected.has(name));
  if (missing.length || unexpected.length || names.length !== expected.size) {
    throw new WeightsError(`the weights do not match the config: missing ${JSON.stringify(missing.slice(0, 5))}, ` +
                           `unexpected ${JSON.stringify(unexpected.slice(0, 5))}`);
  }
  const tensors = {};
  let end = 0; // bytes of data taken by the tensors so far
  for (const { name, shape, offset } of entries) {
    const needed = expected.get(name);
    if (JSON.stringify(shape) !== JSON.stringify(needed)) {
      throw new WeightsError(`weight ${name} has shape ${JSON.stringify(shape)} in the file; ` +
                             `a model of this config needs ${JSON.stringify(needed)}`);
    }
    if (offset !== end) {
      throw new WeightsError(`the weights file is corrupted: weight ${name} starts at byte ${JSON.stringify(offset)} ` +
                             `of the data, the weight before it ends at byte ${end}`);
    }
    const size = shape.reduce((a, b) => a * b, 1);
    end += 4 * size;
    if (start + end > buffer.byteLength) {
      throw new WeightsError(`the weights file is truncated: weight ${name} ends at byte ${start + end}, ` +
                             `the file has ${buffer.byteLength}`);
    }
    tensors[name] = LITTLE_ENDIAN ? new Float32Array(buffer, start + offset, size)
      : Float32Array.from({ length: size }, (_, i) => new DataView(buffer).getFloat32(start + offset + 4 * i, true));
  }
  if (start + end !== buffer.byteLength) {
    throw new WeightsError(`the weights file is corrupted: ${buffer.byteLength - start - end} bytes follow its last weight`);
  }
  for (const { name } of entries) {
    const bad = tensors[name].reduce((count, x) => count + (Number.isFinite(x) ? 0 : 1), 0);
    if (bad) throw new WeightsError(`weight ${name} holds ${bad} non-finite values (NaN or inf)`);
  }
  return tensors;
}

// W (rows, columns) -> W^T (columns, rows).
function transpose(W, rows, columns) {
  const T = new Float64Array(rows * columns);
  for (let r = 0; r < rows; r++) for (let c = 0; c < columns; c++) T[c * rows + r] = W[r * columns + c];
  return T;
}

// The model: config, vocabulary, the file's tensors by name (float32), and each block's weights as the
// forward pass reads them: in float64, as every array the operations touch (V8 runs a loop fastest when
// all its arrays are of one kind).
function assemble(config, vocabulary, courseVocabulary, tensors) {
  const { d, H, d_head: dh, L } = config;
  const blocks = [];
  const f64 = (name) => Float64Array.from(tensors[name]);
  for (let l = 0; l < L; l++) {
    const w = (name) => f64(`blocks.${l}.${name}`);
    const perHead = (W) => Array.from({ length: H }, (_, h) => transpose(W.subarray(h * d * dh, (h + 1) * d * dh), d, dh));
    const W_O = w("attn.W_O"); // (d, d)
    const block = {
      ln_1: { gamma: w("ln_1.gamma"), beta: w("ln_1.beta") },
      attn: {
        W_Qt: perHead(w("attn.W_Q")), // H x (d_head, d): (W_Q^h)^T
        W_Kt: perHead(w("attn.W_K")),
        W_Vt: perHead(w("attn.W_V")),
        // H x (d, d_head): (W_O^h)^T, W_O^h being rows h*d_head .. (h+1)*d_head of W_O (d, d)
        W_Ot: Array.from({ length: H }, (_, h) => transpose(W_O.subarray(h * dh * d, (h + 1) * dh * d), dh, d)),
        b_O: w("attn.b_O"), // (d,)
      },
    };
    if (!config.attn_only) {
      block.ln_2 = { gamma: w("ln_2.gamma"), beta: w("ln_2.beta") };
      block.mlp = { W_1: w("mlp.W_1"), b_1: w("mlp.b_1"), W_2: w("mlp.W_2"), b_2: w("mlp.b_2") };
    }
    blocks.push(block);
  }
  return {
    config, vocabulary, courseVocabulary, tensors, blocks,
    ids: new Map(Array.from(vocabulary, (ch, i) => [ch, i])),
    E: f64("E"), // (V, d)
    P: f64("P"), // (T_max, d)
    ln_f: { gamma: f64("ln_f.gamma"), beta: f64("ln_f.beta") },
    W_Ut: config.tie_weights ? f64("E") : transpose(tensors.W_U, d, config.V), // (V, d): W_U^T, or E when tied
  };
}

// ---------------------------------------------------------------------------------------------------
// Text -> ids, refused in the kernel's words (gptlib.data.encode, gptlib.viz.attention.attention_run,
// gptlib.viz.decomposition.stream_run; tests/browser/test_page_model.py holds them equal).

const UNKNOWN_SHOWN = 5; // gptlib.data.UNKNOWN_SHOWN

// Python's repr() of one character: how the kernel's sentences quote it.
function pythonRepr(ch) {
  const escapes = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };
  if (ch === "'") return `"'"`;
  if (escapes[ch]) return `'${escapes[ch]}'`;
  const code = ch.codePointAt(0);
  if (ch !== " " && /[\p{C}\p{Z}]/u.test(ch)) { // not printable, as str.isprintable says
    const hex = code.toString(16);
    const escaped = code < 0x100 ? `\\x${hex.padStart(2, "0")}` : code < 0x10000 ? `\\u${hex.padStart(4, "0")}`
      : `\\U${hex.padStart(8, "0")}`;
    return `'${escaped}'`;
  }
  return `'${ch}'`;
}

// "'x', 'y' and 3 more": the first UNKNOWN_SHOWN distinct characters in code point order, the rest counted.
function named(characters) {
  const sorted = [...new Set(characters)].sort((a, b) => a.codePointAt(0) - b.codePointAt(0));
  const shown = sorted.slice(0, UNKNOWN_SHOWN).map(pythonRepr).join(", ");
  return sorted.length > UNKNOWN_SHOWN ? `${shown} and ${sorted.length - UNKNOWN_SHOWN} more` : shown;
}

export function encode(model, text) {
  if (typeof text !== "string") throw new TextError(`the text must be a string, got ${text === null ? "null" : typeof text}`);
  const characters = Array.from(text); // code points, as Python counts them
  const { T_max, V } = model.config;
  if (characters.length === 0) throw new TextError("type at least one character");
  if (characters.length > T_max) {
    throw new TextError(`the text has ${characters.length} characters; this model reads at most T_max = ${T_max}`);
  }
  const course = new Set(model.courseVocabulary);
  const outside = characters.filter((ch) => !course.has(ch));
  if (outside.length) {
    throw new TextError(`characters outside the course's ${course.size}-character vocabulary: ${named(outside)}`);
  }
  const unread = characters.filter((ch) => !model.ids.has(ch));
  if (unread.length) throw new TextError(`the text holds characters this model does not read (V = ${V}): ${named(unread)}`);
  return Int32Array.from(characters, (ch) => model.ids.get(ch));
}

// ---------------------------------------------------------------------------------------------------
// The operations, on n rows at a time.

// out (n, m) = X (n, k) W^T + b for W stored (m, k) (its rows `stride` apart, k by default), b (m,) or null:
// every entry a dot product of two contiguous rows. Four rows of X against two rows of W at a time (eight
// sums held in registers): each weight read once serves four rows, ~3x faster than one entry at a time.
export function matmulT(out, X, W, b, n, k, m, stride = k) {
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const x0 = i * k, x1 = x0 + k, x2 = x1 + k, x3 = x2 + k;
    for (let j = 0; j < m; j += 2) {
      const two = j + 1 < m, w0 = j * stride, w1 = two ? w0 + stride : w0;
      let a0 = 0, a1 = 0, a2 = 0, a3 = 0, c0 = 0, c1 = 0, c2 = 0, c3 = 0;
      for (let c = 0; c < k; c++) {
        const p = W[w0 + c], q = W[w1 + c], u0 = X[x0 + c], u1 = X[x1 + c], u2 = X[x2 + c], u3 = X[x3 + c];
        a0 += u0 * p; a1 += u1 * p; a2 += u2 * p; a3 += u3 * p;
        c0 += u0 * q; c1 += u1 * q; c2 += u2 * q; c3 += u3 * q;
      }
      const bj = b === null ? 0 : b[j], o = i * m + j;
      out[o] = a0 + bj; out[o + m] = a1 + bj; out[o + 2 * m] = a2 + bj; out[o + 3 * m] = a3 + bj;
      if (two) {
        const bk = b === null ? 0 : b[j + 1];
        out[o + 1] = c0 + bk; out[o + m + 1] = c1 + bk; out[o + 2 * m + 1] = c2 + bk; out[o + 3 * m + 1] = c3 + bk;
      }
    }
  }
  for (; i < n; i++) { // the last n mod 4 rows (one, when a character is appended), against 4 rows of W at a time
    const x = i * k;
    for (let j = 0; j < m; j += 4) {
      const w0 = j * stride, w1 = j + 1 < m ? w0 + stride : w0, w2 = j + 2 < m ? w0 + 2 * stride : w0;
      const w3 = j + 3 < m ? w0 + 3 * stride : w0;
      let a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      for (let c = 0; c < k; c++) {
        const u = X[x + c];
        a0 += u * W[w0 + c]; a1 += u * W[w1 + c]; a2 += u * W[w2 + c]; a3 += u * W[w3 + c];
      }
      const o = i * m + j, bias = (e) => (b === null ? 0 : b[j + e]); // each summed as above: the same bits
      out[o] = a0 + bias(0);
      if (j + 1 < m) out[o + 1] = a1 + bias(1);
      if (j + 2 < m) out[o + 2] = a2 + bias(2);
      if (j + 3 < m) out[o + 3] = a3 + bias(3);
    }
  }
}

// Definition 4.1 on each of n rows: LN(u) = gamma * (u - mean(u) 1) / sqrt(sigma(u)^2 + eps) + beta,
// sigma^2 dividing by d. out and X (n, d) may be one array. scales (n,) or null receives each row's
// sqrt(sigma^2 + eps), the scale that decomposition freezes for LN_f.
export function layerNorm(out, X, ln, n, d, eps, scales = null) {
  for (let i = 0; i < n; i++) {
    const row = i * d;
    let mean = 0;
    for (let k = 0; k < d; k++) mean += X[row + k];
    mean /= d;
    let variance = 0;
    for (let k = 0; k < d; k++) variance += (X[row + k] - mean) ** 2;
    variance /= d;
    const scale = Math.sqrt(variance + eps);
    if (scales !== null) scales[i] = scale;
    for (let k = 0; k < d; k++) out[row + k] = ln.gamma[k] * (X[row + k] - mean) / scale + ln.beta[k];
  }
}

// erf z = 2/sqrt(pi) e^(-z^2) sum_n 2^n z^(2n+1) / (1 * 3 * ... * (2n+1))  (Abramowitz & Stegun 7.1.6), for
// 0 <= z < 6: every term is positive, so the sum, taken until a term no longer changes it (150 terms at
// most), is good to float64's rounding. Used only to build erf's table: too slow for every hidden unit.
function erfSeries(z) {
  let term = z, sum = z;
  for (let n = 1; sum + term * ((2 * z * z) / (2 * n + 1)) !== sum; n++) {
    term *= (2 * z * z) / (2 * n + 1);
    sum += term;
  }
  return (2 / Math.sqrt(Math.PI)) * Math.exp(-z * z) * sum;
}

// erf as 48 Taylor polynomials of degree 8 on [0, 6), around the centres a_k = (k + 1/2) / 8. Their
// coefficients are erf's derivatives divided by n!: erf^(n)(a) = (-1)^(n-1) H_(n-1)(a) 2/sqrt(pi) e^(-a^2),
// H the Hermite polynomials (H_0 = 1, H_1 = 2a, H_(n+1) = 2a H_n - 2n H_(n-1)); erf(a) is erfSeries(a).
const ERF_STEP = 1 / 8, ERF_DEGREE = 8, ERF_END = 6;
const ERF_TAYLOR = Float64Array.from(Array.from({ length: ERF_END / ERF_STEP }, (_, k) => {
  const a = (k + 0.5) * ERF_STEP, slope = (2 / Math.sqrt(Math.PI)) * Math.exp(-a * a);
  const coefficients = [erfSeries(a)];
  let previous = 0, hermite = 1, factorial = 1; // H_(n-2), H_(n-1), n!
  for (let n = 1; n <= ERF_DEGREE; n++) {
    factorial *= n;
    coefficients.push(((-1) ** (n - 1) * hermite * slope) / factorial);
    [previous, hermite] = [hermite, 2 * a * hermite - 2 * (n - 1) * previous];
  }
  return coefficients;
}).flat()); // (48, ERF_DEGREE + 1), one row per interval

// erf(z) within 1e-13 of the exact value (tests/browser/test_page_model.py checks it against Python's
// math.erf), fast enough for every hidden unit of every MLP (131,072 per full pass of the course model):
// erf(-z) = -erf(z); on [0, 6) the Taylor polynomial of z's interval, by Horner's rule; beyond, 1
// (1 - erf(6) = 2e-17, below float64's rounding of 1).
export function erf(z) {
  const a = Math.abs(z);
  if (!(a < ERF_END)) return Number.isNaN(z) ? NaN : Math.sign(z);
  const k = Math.floor(a / ERF_STEP), x = a - (k + 0.5) * ERF_STEP, c = k * (ERF_DEGREE + 1);
  let sum = ERF_TAYLOR[c + ERF_DEGREE];
  for (let n = ERF_DEGREE - 1; n >= 0; n--) sum = sum * x + ERF_TAYLOR[c + n];
  return z < 0 ? -sum : sum;
}

// GELU(t) = t Phi(t) = t (1 + erf(t / sqrt 2)) / 2, the exact form Definition 2.1 uses (not tanh's).
export function gelu(t) {
  return 0.5 * t * (1 + erf(t / Math.SQRT2));
}

// Definition 2.1 on n rows: MLP(u) = W_2 GELU(W_1 u + b_1) + b_2. X (n, d) -> out (n, d); hidden (n, d_ff) scratch.
export function mlp(out, X, weights, n, d, d_ff, hidden) {
  matmulT(hidden, X, weights.W_1, weights.b_1, n, d, d_ff); // W_1 (d_ff, d)
  for (let i = 0; i < n * d_ff; i++) hidden[i] = gelu(hidden[i]);
  matmulT(out, hidden, weights.W_2, weights.b_2, n, d_ff, d); // W_2 (d, d_ff)
}

// Definition 1.1, one head, for the queries p .. p+n-1 of a sequence whose keys and values up to T-1 are
// cached: S = Q K^T / sqrt(d_head) + M, the mask M being -inf where s > t (those keys get weight 0),
// A_t = softmax(S_t) for each query row, and the head's output C = A V, C_t = sum_s A_ts v_s.
// Q (n, d_head) the queries; K (T_max, d_head) the keys; Vt (d_head, T_max) the values, transposed;
// A (T_max, T_max) receives rows p .. p+n-1; C (n, d_head); S (n, T) scratch.
export function attentionHead(C, A, Q, K, Vt, S, p, n, T, d_head, T_max, causal) {
  const scale = 1 / Math.sqrt(d_head);
  matmulT(S, Q, K, null, n, d_head, T); // q_t . k_s for every cached key, (n, T)
  for (let i = 0; i < n; i++) {
    const t = p + i, row = i * T;
    const last = causal ? t : T - 1; // the last key query t sees: the mask M
    let max = -Infinity;
    for (let s = 0; s <= last; s++) max = Math.max(max, S[row + s] * scale);
    let total = 0;
    for (let s = 0; s <= last; s++) {
      S[row + s] = Math.exp(S[row + s] * scale - max);
      total += S[row + s];
    }
    for (let s = 0; s < T; s++) {
      S[row + s] = s <= last ? S[row + s] / total : 0; // A_ts
      A[t * T_max + s] = S[row + s];
    }
  }
  matmulT(C, S, Vt, null, n, T, d_head, T_max); // C = A V, (n, d_head)
}

// Definition 1.1, all heads, for positions p .. T-1 (n = T - p rows of X, the attention's input):
// MHA(X) = [C^1 | ... | C^H] W_O + b_O = sum_h C^h W_O^h + b_O, written into out (n, d). Each head's
// write C^h W_O^h is kept in state.heads[l][h] (T_max, d) at rows p.., its keys and values in the cache.
function multiHeadAttention(out, X, weights, state, l, p, n, T) {
  const { d, H, d_head, T_max, causal } = state.config, s = state.scratch;
  out.fill(0, 0, n * d);
  for (let h = 0; h < H; h++) {
    const K = state.keys[l][h], Vt = state.values[l][h]; // (T_max, d_head), (d_head, T_max)
    matmulT(s.q, X, weights.W_Qt[h], null, n, d, d_head); // X W_Q^h, (n, d_head)
    matmulT(K.subarray(p * d_head), X, weights.W_Kt[h], null, n, d, d_head); // X W_K^h
    matmulT(s.v, X, weights.W_Vt[h], null, n, d, d_head); // X W_V^h
    for (let i = 0; i < n; i++) for (let c = 0; c < d_head; c++) Vt[c * T_max + p + i] = s.v[i * d_head + c];
    attentionHead(s.c, state.attention[l][h], s.q, K, Vt, s.scores, p, n, T, d_head, T_max, causal);
    matmulT(s.head, s.c, weights.W_Ot[h], null, n, d_head, d); // C^h W_O^h, (n, d)
    state.heads[l][h].set(s.head.subarray(0, n * d), p * d);
    for (let i = 0; i < n * d; i++) out[i] += s.head[i];
  }
  for (let i = 0; i < n * d; i++) out[i] += weights.b_O[i % d];
}

// Definition 3.1, the pre-norm block, on the stream X (n, d) in place: Y = X + MHA(LN_1(X)),
// X' = Y + MLP(LN_2(Y)); Aside 3.5's post-norm block, Y = LN_1(X + MHA(X)), X' = LN_2(Y + MLP(Y));
// an attention-only block (config.attn_only) stops at Y. The MLP's write is kept in state.mlp[l].
function block(X, weights, state, l, p, n, T) {
  const { d, d_ff, ln_eps: eps, norm } = state.config, s = state.scratch;
  if (norm === "pre") {
    layerNorm(s.a, X, weights.ln_1, n, d, eps);
    multiHeadAttention(s.b, s.a, weights.attn, state, l, p, n, T);
    for (let i = 0; i < n * d; i++) X[i] += s.b[i]; // Y
    if (!weights.mlp) return;
    layerNorm(s.a, X, weights.ln_2, n, d, eps);
    mlp(s.b, s.a, weights.mlp, n, d, d_ff, s.hidden);
  } else {
    multiHeadAttention(s.b, X, weights.attn, state, l, p, n, T);
    for (let i = 0; i < n * d; i++) X[i] += s.b[i];
    layerNorm(X, X, weights.ln_1, n, d, eps); // Y
    mlp(s.b, X, weights.mlp, n, d, d_ff, s.hidden);
  }
  state.mlp[l].set(s.b.subarray(0, n * d), p * d);
  for (let i = 0; i < n * d; i++) X[i] += s.b[i];
  if (norm === "post") layerNorm(X, X, weights.ln_2, n, d, eps);
}

// Section 5 for positions p .. T-1 of `tokens`: X^(0)_t = E[x_t] + P[t], the L blocks, and the logits
// Z = LN_f(X^(L)) W_U, kept in state with LN_f's scale of each position.
function gpt(model, state, tokens, p, T) {
  const { d, V, L, ln_eps: eps } = model.config, n = T - p, X = state.scratch.x; // X (n, d)
  for (let i = 0; i < n; i++) {
    const t = p + i, e = tokens[t] * d;
    for (let k = 0; k < d; k++) {
      state.embed[t * d + k] = model.E[e + k];
      state.position[t * d + k] = model.P[t * d + k];
      X[i * d + k] = model.E[e + k] + model.P[t * d + k];
    }
  }
  for (let l = 0; l < L; l++) block(X, model.blocks[l], state, l, p, n, T);
  layerNorm(state.scratch.a, X, model.ln_f, n, d, eps, state.scratch.scales);
  state.lnfScale.set(state.scratch.scales.subarray(0, n), p);
  matmulT(state.scratch.logits, state.scratch.a, model.W_Ut, null, n, d, V);
  state.logits.set(state.scratch.logits.subarray(0, n * V), p * V);
}

// ---------------------------------------------------------------------------------------------------
// A session keeps everything computed for the positions of the text it last ran: keys, values and every
// per-position result. A causal model's position t depends on positions 0..t alone, so a text that shares
// its first p characters with the last one is computed from position p on (a model without the causal
// mask, from 0).

const filled = (count, make) => Array.from({ length: count }, make);

export class Session {
  constructor(model) {
    const { T_max, d, d_head, d_ff, H, L, V } = model.config;
    const rows = (width) => new Float64Array(T_max * width);
    const kept = (width) => new Float32Array(T_max * width);
    this.model = model;
    this.config = model.config;
    this.tokens = new Int32Array(T_max);
    this.seen = 0; // positions 0 .. seen-1 hold the results for this.tokens
    this.keys = filled(L, () => filled(H, () => rows(d_head)));
    this.values = filled(L, () => filled(H, () => rows(d_head))); // each (d_head, T_max): V^T
    this.attention = filled(L, () => filled(H, () => kept(T_max)));
    this.embed = kept(d);
    this.position = kept(d);
    this.heads = filled(L, () => filled(H, () => kept(d)));
    this.mlp = model.config.attn_only ? [] : filled(L, () => kept(d));
    this.logits = kept(V);
    this.lnfScale = new Float32Array(T_max);
    this.scratch = {
      x: rows(d), a: rows(d), b: rows(d), head: rows(d), q: rows(d_head), v: rows(d_head), c: rows(d_head),
      hidden: rows(d_ff), logits: rows(V), scores: rows(T_max), scales: new Float64Array(T_max),
    };
  }

  // tokens: ids (an Int32Array from encode, or any array of whole numbers) -> Run.
  run(tokens) {
    if (!Array.isArray(tokens) && !(ArrayBuffer.isView(tokens) && !(tokens instanceof DataView))) {
      throw new RangeError(`tokens must be an array of token ids (encode's Int32Array), got ${tokens}`);
    }
    const { T_max, V, causal } = this.config, T = tokens.length;
    if (T === 0) throw new TextError("type at least one character");
    if (T > T_max) throw new TextError(`the text has ${T} characters; this model reads at most T_max = ${T_max}`);
    const bad = Array.from(tokens).filter((id) => !(Number.isInteger(id) && id >= 0 && id < V));
    if (bad.length) throw new RangeError(`token ids must lie in [0, V) = [0, ${V}), got ${bad.slice(0, 5).join(", ")}`);
    let p = 0; // the first position whose result is not kept
    if (causal) while (p < Math.min(T, this.seen) && this.tokens[p] === tokens[p]) p++;
    if (p < T) {
      this.tokens.set(tokens.slice(p), p);
      gpt(this.model, this, this.tokens, p, T);
      this.seen = T;
    }
    return new Run(this, T);
  }
}

// The results of one text, copied out of the session (a later run changes nothing here).
export class Run {
  constructor(session, T) {
    const { V, d, T_max } = session.config;
    const rows = (array, width) => array.slice(0, T * width);
    this.T = T;
    this.tokens = session.tokens.slice(0, T); // (T,)
    this.logits = rows(session.logits, V); // (T, V)
    this.attention = session.attention.map((layer) => layer.map((A) => { // [l][h] (T, T): row t = query t
      const square = new Float32Array(T * T);
      for (let t = 0; t < T; t++) square.set(A.subarray(t * T_max, t * T_max + T), t * T);
      return square;
    }));
    this.writes = { // what each part of the model adds into the residual stream (Remark 3.4); in a post-norm
      // model what each head and MLP outputs, which its LayerNorms then rescale with the whole stream
      embed: rows(session.embed, d), // (T, d): E[x_t]
      position: rows(session.position, d), // (T, d): P[t]
      heads: session.heads.map((layer) => layer.map((write) => rows(write, d))), // [l][h] (T, d): C^h W_O^h
      biasO: session.model.blocks.map((_, l) => session.model.tensors[`blocks.${l}.attn.b_O`].slice()), // [l] (d,)
      mlp: session.mlp.map((write) => rows(write, d)), // [l] (T, d); [] when attn_only
    };
    this.lnfScale = session.lnfScale.slice(0, T); // (T,): sqrt(sigma(X^(L)_t)^2 + eps), LN_f's scale
  }
}

// ---------------------------------------------------------------------------------------------------
// Direct logit attribution, as gptlib.analysis.decomposition computes it: with LN_f's scale s frozen,
// Z = sum over writes w of (C w) * gamma / s W_U + beta W_U, C centring each row.

export function writeLabels(config) {
  const labels = ["E[x]", "P"];
  for (let l = 0; l < config.L; l++) {
    for (let h = 0; h < config.H; h++) labels.push(`L${l}H${h}`);
    labels.push(`L${l} b_O`);
    if (!config.attn_only) labels.push(`L${l} MLP`);
  }
  return labels;
}

// Each write's row (d,) at `position`, in writeLabels order.
export function writeRows(run, position, config) {
  const { d } = config, row = (write) => write.subarray(position * d, (position + 1) * d);
  const rows = [row(run.writes.embed), row(run.writes.position)];
  for (let l = 0; l < config.L; l++) {
    rows.push(...run.writes.heads[l].map(row), run.writes.biasO[l]);
    if (!config.attn_only) rows.push(row(run.writes.mlp[l]));
  }
  return rows;
}

// ||(A^h X W_OV^h)_t||, the length of each head's write at each position, of layer l: (H, T) as the
// attention explorer draws them (gptlib.viz.attention.attention_run's write_norms).
export function writeNorms(run, l) {
  const heads = run.writes.heads[l], T = run.T, d = heads[0].length / T;
  const norms = new Float32Array(heads.length * T);
  heads.forEach((write, h) => {
    for (let t = 0; t < T; t++) {
      let sum = 0;
      for (let k = 0; k < d; k++) sum += write[t * d + k] ** 2;
      norms[h * T + t] = Math.sqrt(sum);
    }
  });
  return norms;
}

function wholeIn(name, value, low, high) {
  if (!Number.isInteger(value) || value < low || value > high) {
    throw new RangeError(`${name} must be a whole number in [${low}, ${high}], got ${value}`);
  }
}

// decomposition.direct_logit_attribution's numbers for a Run: each write's direct contribution to the
// logit of `token` at `position`, or to logit token - logit against. -> {labels, values (n,), rest, logit}:
// rest is LN_f's own beta W_U, logit the model's; values sum with rest to logit, up to rounding.
export function directContributions(model, run, position, token, against = null) {
  const { d, V, norm } = model.config;
  if (norm !== "pre") {
    throw new RangeError("the stream is a sum of writes only in a pre-norm GPT (Definition 3.1); " +
                         "a post-norm block rescales the whole stream after each write (Aside 3.5)");
  }
  wholeIn("position", position, 0, run.T - 1);
  wholeIn("token", token, 0, V - 1);
  if (against !== null) wholeIn("against", against, 0, V - 1);
  const u = new Float64Array(d); // W_U's column for token, minus against's
  for (let k = 0; k < d; k++) {
    u[k] = model.W_Ut[token * d + k] - (against === null ? 0 : model.W_Ut[against * d + k]);
  }
  const s = run.lnfScale[position], gamma = model.ln_f.gamma;
  const values = new Float64Array(writeRows(run, position, model.config).map((w) => {
    let mean = 0;
    for (let k = 0; k < d; k++) mean += w[k];
    mean /= d;
    let value = 0;
    for (let k = 0; k < d; k++) value += ((w[k] - mean) * gamma[k] / s) * u[k];
    return value;
  }));
  let rest = 0;
  for (let k = 0; k < d; k++) rest += model.ln_f.beta[k] * u[k];
  const z = (v) => run.logits[position * V + v];
  return { labels: writeLabels(model.config), values, rest, logit: z(token) - (against === null ? 0 : z(against)) };
}
