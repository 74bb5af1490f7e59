#!/usr/bin/env node
// Reference GPT-2 token ids from the npm package gpt-3-encoder (an independent JavaScript port of
// OpenAI's encoder.py), for tests/model/text/test_tokenizer.cpp to compare against.
//
//   node gpt2_reference.js CASES.json OUT.json
//
// CASES.json is an array of strings; OUT.json becomes [{"text": ..., "ids": [...]}, ...].
// The package resolves from tests/node_modules (`npm ci --prefix tests`).
'use strict';

const fs = require('fs');

function fail(message) {
  process.stderr.write(`gpt2_reference.js: ${message}\n`);
  process.exit(1);
}

function main() {
  const [casesPath, outPath] = process.argv.slice(2);
  if (!casesPath || !outPath || process.argv.length !== 4) {
    fail('usage: node gpt2_reference.js CASES.json OUT.json');
  }

  let encode;
  try {
    ({ encode } = require('gpt-3-encoder'));
  } catch (e) {
    fail(`cannot load gpt-3-encoder (run "npm ci --prefix tests"): ${e.message}`);
  }

  let cases;
  try {
    cases = JSON.parse(fs.readFileSync(casesPath, 'utf-8'));
  } catch (e) {
    fail(`${casesPath}: ${e.message}`);
  }
  if (!Array.isArray(cases)) fail(`${casesPath}: not a JSON array`);

  const results = cases.map((text, i) => {
    if (typeof text !== 'string') fail(`${casesPath}: case ${i} is not a string`);
    const ids = encode(text);
    // gpt-3-encoder maps a piece missing from its vocabulary to undefined (null in JSON) rather
    // than failing; that would make a meaningless reference.
    const bad = ids.findIndex((id) => !Number.isInteger(id));
    if (bad >= 0) fail(`case ${i} ${JSON.stringify(text)}: token ${bad} has no id`);
    return { text, ids };
  });

  try {
    fs.writeFileSync(outPath, JSON.stringify(results, null, 1) + '\n');
  } catch (e) {
    fail(`${outPath}: ${e.message}`);
  }
  process.stdout.write(`gpt2_reference.js: wrote ${results.length} cases to ${outPath}\n`);
}

main();
