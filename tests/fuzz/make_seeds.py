#!/usr/bin/python3
"""Writes the generated seed inputs under tests/fuzz/corpus (they are committed; run again only to
change them): small valid safetensors files, the tokenizer test texts, tiny GPT-2 tokenizer files,
torch.save archives with their pickles, and the pickles inside the abuse fixtures. Needs Debian's
python3-torch. Regression inputs the fuzzers found are committed beside these by hand.

    /usr/bin/python3 tests/fuzz/make_seeds.py
"""
import collections
import io
import json
import pathlib
import pickle
import struct
import zipfile

import torch

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = HERE / "corpus"


def write(folder, name, data):
    path = CORPUS / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


def safetensors(tensors, metadata=None):
    """tensors: (name, dtype, shape, element size); data bytes are a counting pattern."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, item in tensors:
        n = item
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        blobs.append(bytes(i % 251 for i in range(n)))
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def seeds_safetensors():
    write("safetensors", "two_f32.safetensors",
          safetensors([("h.0.attn.c_attn.weight", "F32", [4, 12], 4), ("h.0.attn.c_attn.bias", "F32", [12], 4)],
                      {"format": "pt"}))
    write("safetensors", "mixed.safetensors",
          safetensors([("a", "F16", [2, 3], 2), ("b", "BF16", [3], 2), ("scalar", "I64", [], 8),
                       ("empty", "F32", [0, 5], 4), ("mask", "BOOL", [7], 1), ("f8", "F8_E4M3", [2, 2], 1)]))
    write("safetensors", "no_tensors.safetensors", safetensors([], {"note": "nothing here"}))


def seeds_text():
    cases = json.loads((ROOT / "tests/model/tokenizer_cases.json").read_text(encoding="utf-8"))
    for i, text in enumerate(cases):
        write("text", f"case_{i:02d}.txt", text)
    write("text", "invalid_utf8.txt", b"ok \xff then \xe2\x82 truncated \xed\xa0\x80 surrogate \xc0\xaf overlong")
    write("text", "sentencepiece_marker.txt", "\u2581 already a marker \u2581\u2581x")
    # Long runs (issue 38): the regex budget and the text's size limit are per text.
    write("text", "long_runs.txt", " " * 3000 + "x" + "\t" * 2000 + "\n" + "\u00e9" * 1500 + "1" * 1000 + "!" * 1000)


def tiny_gpt2():
    """The 256 byte tokens and GPT-2's first 60 merges: consistent, small vocab.json + merges.txt."""
    vocab = json.loads((ROOT / "assets/tokenizers/gpt2/vocab.json").read_text(encoding="utf-8"))
    lines = (ROOT / "assets/tokenizers/gpt2/merges.txt").read_text(encoding="utf-8").split("\n")
    merges = [l.split(" ") for l in lines[1:61]]
    keep = {t: i for t, i in vocab.items() if i < 256}
    for a, b in merges:
        keep[a + b] = vocab[a + b]
    return keep, merges


def seeds_tokenizer_files():
    vocab, merges = tiny_gpt2()
    vocab_json = json.dumps(vocab, ensure_ascii=False)
    merges_txt = "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)
    # Even first byte: vocab.json NUL merges.txt. Odd: tokenizer.json.
    write("tokenizer_files", "gpt2_tiny_pair", "\x00" + vocab_json + "\x00" + merges_txt)
    write("tokenizer_files", "gpt2_minimal_pair", "\x00" + '{"a": 0, "b": 1, "ab": 2, "<unk>": 3}' + "\x00" + "a b\n")
    hf_new = {"version": "1.0", "model": {"type": "BPE", "vocab": vocab, "merges": [[a, b] for a, b in merges]}}
    hf_old = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}, "added_tokens": []}
    write("tokenizer_files", "hf_new_merges", "\x01" + json.dumps(hf_new, ensure_ascii=False))
    write("tokenizer_files", "hf_old_merges", "\x01" + json.dumps(hf_old))
    write("tokenizer_files", "hf_wordpiece", "\x01" + json.dumps({"model": {"type": "WordPiece", "vocab": {}}}))
    seeds_hf_components()
    seeds_hf_budgets()


LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def hf(name, vocab, merges, **parts):
    """A tokenizer.json seed: `vocab` a list of tokens (ids in order), the rest its components."""
    file = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": None, "post_processor": None, "decoder": None}
    model = {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False, "byte_fallback": False,
             "ignore_merges": False, "vocab": {t: i for i, t in enumerate(vocab)}, "merges": merges}
    model.update(parts.pop("model", {}))
    file.update(parts)
    file["model"] = model
    write("tokenizer_files", name, "\x01" + json.dumps(file, ensure_ascii=False))


def added(id, content, **flags):
    token = {"id": id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
    token.update(flags)
    return token


def seeds_hf_components():
    """One seed per kind of component tokenizer.json may hold (fuzz_tokenizer_files, odd first byte)."""
    # Byte-level, as Llama 3 and Qwen 3: the 256 byte characters, a few merges, special tokens.
    gpt2 = json.loads((ROOT / "assets/tokenizers/gpt2/vocab.json").read_text(encoding="utf-8"))
    byte_chars = [t for t, i in sorted(gpt2.items(), key=lambda kv: kv[1]) if i < 256]
    merges = [["\u0120", "t"], ["\u0120", "a"], ["h", "e"], ["i", "n"], ["\u0120t", "he"]]
    level = byte_chars + [a + b for a, b in merges]
    n = len(level)
    template = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [], "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [n], "tokens": ["<|begin_of_text|>"]}}}
    hf("hf_llama3_like", level, merges, added_tokens=[added(n, "<|begin_of_text|>"), added(n + 1, "<|eot_id|>")],
       pre_tokenizer={"type": "Sequence", "pretokenizers": [
           {"type": "Split", "pattern": {"Regex": LLAMA3_REGEX}, "behavior": "Isolated", "invert": False},
           {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
       post_processor={"type": "Sequence", "processors": [
           {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}, template]},
       decoder={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
       model={"ignore_merges": True})
    hf("hf_qwen_like", level, [" ".join(m) for m in merges],
       added_tokens=[added(n, "<|endoftext|>"), added(n + 1, "<|im_start|>", rstrip=True),
                     added(n + 2, "<|im_end|>", lstrip=True), added(n + 3, "ab", single_word=True, special=False),
                     added(n + 4, "Hello", normalized=True, special=False)],
       normalizer={"type": "NFC"},
       pre_tokenizer={"type": "Sequence", "pretokenizers": [
           {"type": "Split", "pattern": {"Regex": LLAMA3_REGEX.replace("{1,3}", "")}, "behavior": "Isolated", "invert": False},
           {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
       post_processor={"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
       decoder={"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False})
    hf("hf_gpt2_regex", level, merges, pre_tokenizer={"type": "ByteLevel", "add_prefix_space": True, "use_regex": True},
       post_processor={"type": "RobertaProcessing", "sep": ["</s>", n + 1], "cls": ["<s>", n], "trim_offsets": True,
                       "add_prefix_space": True},
       added_tokens=[added(n, "<s>"), added(n + 1, "</s>")], decoder={"type": "ByteLevel"})

    # SentencePiece-style, as Llama 2 and Mistral: "▁" for spaces, byte pieces, an unknown token.
    m = "\u2581"
    chars = ["<unk>", "<s>", "</s>", m] + list("abcdefghilnorstuwxyz0123456789.,!'") + [
        "<0xC3>", "<0xA9>", "<0xF0>", "<0x9F>", "<0xA6>", "<0x8A>", "<0x0A>", "<0x09>"]
    sp_merges = [f"{m} t", f"{m} a", "h e", f"{m}t he", "i n", f"{m} {m}"]
    sp_vocab = chars + [f"{m}t", f"{m}a", "he", f"{m}the", "in", m + m]
    llama2_decoder = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": m}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    bos = {"type": "TemplateProcessing",
           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    sp_added = [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")]
    sp_model = {"unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True}
    hf("hf_llama2_like", sp_vocab, sp_merges, added_tokens=sp_added, model=sp_model, post_processor=bos,
       normalizer={"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": m},
                                                        {"type": "Replace", "pattern": {"String": " "}, "content": m}]},
       decoder=llama2_decoder)
    for scheme, split in (("first", False), ("always", True), ("never", True)):
        hf(f"hf_metaspace_{scheme}", sp_vocab, sp_merges, added_tokens=sp_added, model=sp_model, post_processor=bos,
           pre_tokenizer={"type": "Metaspace", "replacement": m, "prepend_scheme": scheme, "split": split},
           decoder={"type": "Metaspace", "replacement": m, "prepend_scheme": scheme, "split": split})

    # Normalizers, every split behaviour and Digits, on a plain character vocabulary.
    plain = list("abcdefghilnorstuwxyz0123456789 .,!'-") + ["ab", "-b", "12"]
    plain_merges = ["a b", "- b", "1 2"]
    hf("hf_normalizers", plain, plain_merges, model={"unk_token": "a"},
       normalizer={"type": "Sequence", "normalizers": [
           {"type": "NFKD"}, {"type": "StripAccents"}, {"type": "Lowercase"}, {"type": "Nmt"},
           {"type": "Strip", "strip_left": True, "strip_right": True},
           {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}, {"type": "NFC"}, {"type": "NFKC"}, {"type": "NFD"}]})
    hf("hf_bytelevel_normalizer", level, merges, normalizer={"type": "ByteLevel"}, decoder={"type": "ByteLevel"})
    hf("hf_splits", plain, plain_merges, model={"unk_token": "a", "fuse_unk": True},
       pre_tokenizer={"type": "Sequence", "pretokenizers": [
           {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": False},
           {"type": "Split", "pattern": {"Regex": "[.,!]"}, "behavior": "MergedWithPrevious", "invert": False},
           {"type": "Split", "pattern": {"Regex": "-+"}, "behavior": "Contiguous", "invert": False},
           {"type": "Split", "pattern": {"Regex": "\\w+|[^\\w\\s]+"}, "behavior": "Removed", "invert": True},
           {"type": "Digits", "individual_digits": True}]},
       post_processor={"type": "BertProcessing", "sep": ["-", 35], "cls": ["a", 0]})
    hf("hf_hostile_regex", plain, plain_merges,
       pre_tokenizer={"type": "Split", "pattern": {"Regex": "(a|a)+$|(?<=x)\\b.{0,3}"}, "behavior": "Isolated", "invert": False})
    hf("hf_refused_normalizer", plain, plain_merges, normalizer={"type": "BertNormalizer", "lowercase": True})


def seeds_hf_budgets():
    """Issue 38: regexes that backtrack draw on one budget per text (per decode call in a decoder), and
    steps that grow text are refused as they grow: each seed reaches one of those refusals on the
    fuzzer's longer texts."""
    plain = list("abcdefghilnorstuwxyz0123456789 .,!'-") + ["<s>"]
    backtracks = {"Regex": "(a|a)+\\d"}
    raw_s = added(len(plain) - 1, "<s>")
    hf("hf_budget_split_after_split", plain, [], model={"unk_token": "a"}, pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": backtracks, "behavior": "Isolated", "invert": False}]})
    hf("hf_budget_normalizer", plain, [], model={"unk_token": "a"}, added_tokens=[raw_s],
       normalizer={"type": "Replace", "pattern": backtracks, "content": "b"})
    hf("hf_budget_decoders", plain, [], model={"unk_token": "a"}, decoder={"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": backtracks, "content": "x"}, {"type": "Fuse"},
        {"type": "Replace", "pattern": backtracks, "content": "y"}]})
    hf("hf_growth_empty_pattern", plain, [], model={"unk_token": "a"}, normalizer={"type": "Replace", "pattern": {"String": ""}, "content": "b" * 1024})
    hf("hf_growth_prepend_per_stretch", plain, [], model={"unk_token": "a"}, added_tokens=[raw_s], normalizer={"type": "Prepend", "prepend": "b" * 4000})
    hf("hf_growth_nfkd", plain, [], model={"unk_token": "a"}, normalizer={"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": "a"}, "content": "\ufdfa" * 5}, {"type": "NFKD"}]})
    hf("hf_growth_bytelevel_chain", plain, [], model={"unk_token": "a"}, pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}] * 12})
    hf("hf_growth_decoders", plain, [], model={"unk_token": "a"}, decoder={"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "a"}, "content": "aaaa"}] * 8})
    hf("hf_long_literal", plain, [], model={"unk_token": "a"}, pre_tokenizer={"type": "Split", "pattern": {"String": "a" * 4096 + "b"},
                                                   "behavior": "Removed", "invert": False})


def seeds_json():
    """fuzz_json: the first byte picks the entry point (0 config.json, 1 any JSON, 2 a safetensors
    header before 64 data bytes); deep nesting and escaped names included."""
    def w(name, selector, text):
        write("json", name, bytes([selector]) + text.encode())
    gpt2 = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "layer_norm_epsilon": 1e-05,
            "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_inner": None, "n_layer": 12,
            "n_positions": 1024, "vocab_size": 50257}
    w("config_gpt2.json", 0, json.dumps(gpt2, indent=2))
    ssa = {"n_layer": 2, "n_head": 2, "n_embd": 16, "n_positions": 32, "vocab_size": 100, "activation_function": "gelu",
           "ssa": {"query": {"position": "sigmoid", "token": "shared", "combine": "sum"},
                   "value": {"position": None, "token": "feature", "combine": "product"}}}
    w("config_ssa.json", 0, json.dumps(ssa))
    w("config_deep_n_layer.json", 0,
      '{"n_layer": ' + "[" * 80 + "]" * 80 + ', "n_head": 2, "n_embd": 16, "n_positions": 32, "vocab_size": 100}')
    w("config_escaped_keys.json", 0,
      '{"n_layer": 2, "n_head": 2, "n_embd": 16, "n_ctx": 32, "vocab_size": 100, "ssa": {"query\\n\\u001b[2J": {}}}')
    tok = {"version": "1.0", "added_tokens": [{"id": 5, "content": "<|endoftext|>", "special": True}],
           "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120a": 3, "\u010a": 4, "<|endoftext|>": 5},
                     "merges": ["a b", "\u0120 a"]},
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False}}
    w("tokenizer_tiny.json", 1, json.dumps(tok, ensure_ascii=False))
    w("deep_array.json", 1, "[" * 64 + "]" * 64)
    w("deep_object.json", 1, '{"a":' * 70 + "1" + "}" * 70)
    w("numbers.json", 1, '[0, -0, 1e400, 18446744073709551616, -9223372036854775809, 1.5e-320, "\\ud800", "\\u0000"]')
    header = {"__metadata__": {"format": "pt"}, "w": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 32]},
              "b": {"dtype": "BF16", "shape": [16], "data_offsets": [32, 64]}}
    w("header_two.json", 2, json.dumps(header))
    w("header_deep_dtype.json", 2, '{"w": {"dtype": ' + "[" * 100 + "]" * 100 + ', "shape": [16], "data_offsets": [0, 64]}}')
    w("header_duplicate.json", 2, '{"w": {"dtype": "U8", "shape": [64], "data_offsets": [0, 64]}, '
                                  '"w": {"dtype": "U8", "shape": [64], "data_offsets": [0, 64]}}')


def seeds_session():
    """fuzz_session: session files as the window writes them, and the round-three abuses (a version
    past 32 bits, pins by the thousand, stacked what-if scales, a number past float range)."""
    full = {"ssaviz_session": 1, "model": "/models/ssa small", "compare": "/models/vanilla",
            "interventions": "0:1,1:*=pos,2:0=x0.5", "device": "cpu", "text": "caf\u00e9 \"quoted\"\nline",
            "truncate": True, "selected": [2, 3], "pinned": [[0, 1, "ssa"], [2, 3, "vanilla"], [1, 1]], "query": 7,
            "view": {"colormap": "magma", "log_scale": True, "map": "diff", "token_color": "spikiness", "token_scope": "layer",
                     "sink_epsilon": 0.25, "grid_metric": "js_divergence", "map_zoom": 3.5, "map_pan": [2.0, 7.25],
                     "split": True, "grid_map": "diff", "per_head_scale": True, "matrix_metric": "sink_mass", "grid_cell": 64,
                     "ranking": "drift", "lens_target": "next-against-other", "tab": "Matrix", "layout": {"columns": [0.25, 0.5, 0.25], "editor": 0.4, "editor_open": False}},
            "export": {"out": "/tmp/out dir", "layers": [0, 2, 2], "heads": [1], "formats": ["npy", "csv", "png", "html"],
                       "maps": ["ssa", "diff"], "colormap": "magma", "log_scale": False, "size": 512, "highlight": "tau_v",
                       "highlight_scope": "head", "highlight_head": [1, 2], "sink_epsilon": 0.4}}
    write("session", "full.json", json.dumps(full, indent=1, ensure_ascii=False))
    write("session", "minimal.json", '{"ssaviz_session": 1, "text": "hi"}')
    write("session", "version_wraps.json", '{"ssaviz_session": 4294967297, "text": "hi"}')
    write("session", "pins_repeated.json", json.dumps({"ssaviz_session": 1, "pinned": [[k % 2, k // 2 % 2] for k in range(2000)]}))
    write("session", "pins_too_many.json", json.dumps({"ssaviz_session": 1, "pinned": [[k, 0] for k in range(100)]}))
    write("session", "scales_stacked.json", '{"ssaviz_session": 1, "interventions": "0:0=x1000,0:0=x1000,0:*=x1000"}')
    write("session", "float_range.json", '{"ssaviz_session": 1, "view": {"map_zoom": 1e300, "sink_epsilon": 1e-400}, "query": -1e19}')


def seeds_flags():
    """fuzz_flags: a command byte (the order of kCommands: window, info, tokenize, export, generate,
    init-random, train, eval), then its arguments separated by NUL bytes."""
    def w(name, command, args):
        write("flags", name, bytes([command]) + "\0".join(args).encode())
    w("export_full", 3, ["--model", "m", "--text", "it's", "--out", "o dir", "--layers", "0, 2,2", "--heads", "all",
                         "--format", "json,png", "--maps", "ssa,diff,ssa", "--size", "512", "--highlight-scope", "1,2",
                         "--sink-eps", "0.4", "--ablate", "0:1,1:*=x2.5", "--compare", "local", "--truncate"])
    w("export_empty_lists", 3, ["--text", "t", "--out", "o", "--format", "", "--maps", ",", "--layers", " "])
    w("generate_numbers", 4, ["--text", "t", "--tokens", "+3", "--top-k", "2.5", "--seed", "9007199254740992", "--temperature", "1e-3"])
    w("window_wraps", 0, ["--window", "4294968576x800", "--frames", "4294967297", "--continue", "3"])
    w("train_counts", 6, ["--out", "o", "--task", "graph", "--threads", "1048576", "--seq-len", "100", "--context", "16",
                          "--lr", "0.01", "--warmup", "-1", "--query-form", "sigmoid,shared,sum"])
    w("init_random", 5, ["--out", "o", "--layers", "2", "--heads", "2", "--embd", "16", "--positions", "16", "--seed", "7"])
    write("flags", "ablate_stacked", b"\x03" + b"0:0=x1000,0:0=x1000,0:*=x1000,1:1=x1e-6")
    write("flags", "integer_minus", b"\x01" + b"-9223372036854775809")


def seeds_torch():
    torch.manual_seed(0)
    state = collections.OrderedDict()
    state["wte.weight"] = torch.randn(3, 4)
    state["h.0.attn.bias"] = torch.randn(4).half()
    state["h.0.ln_1.weight"] = torch.randn(4).bfloat16()
    state["step"] = torch.tensor(7)
    state["view"] = state["wte.weight"][1:, 2:]  # shares storage, offset and strides
    checkpoint = {"model": state, "iter_num": 1000, "best_val_loss": 2.5, "config": {"n_layer": 1, "bias": True}}
    for name, obj in (("state_dict", state), ("checkpoint", checkpoint)):
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        data = buffer.getvalue()
        write("zip", f"{name}.pt", data)
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            pkl = next(n for n in z.namelist() if n.endswith("/data.pkl"))
            write("pickle", f"{name}.pkl", z.read(pkl))
    # Plain values at every protocol torch.save may meet, with memo reuse and a cycle.
    shared = [1, 2.5, "text"]
    cyclic = [None, True, False]
    cyclic.append(cyclic)
    value = {"ints": [0, -1, 255, 65535, 2**31, -2**63, 2**70], "floats": [0.0, -1.5, float("inf")],
             "str": "caf\u00e9", "bytes": b"\x00\x01", "tuple": (1, (2, 3), ()), "shared": (shared, shared),
             "cyclic": cyclic, "od": collections.OrderedDict(a=1)}
    for protocol in (2, 3, 4, 5):
        write("pickle", f"plain_protocol{protocol}.pkl", pickle.dumps(value, protocol=protocol))
    write("pickle", "protocol0_text.pkl", pickle.dumps({"a": [1, 2.0, "s"]}, protocol=0))
    # The data.pkl of each abuse fixture (tests/model/fixtures/abuse) that is a readable ZIP.
    for pt in sorted((ROOT / "tests/model/fixtures/abuse").glob("*.pt")):
        if pt.stem == "mark_flood":  # 8 kB of one opcode: would raise every input's size limit 6-fold
            continue
        try:
            with zipfile.ZipFile(pt) as z:
                pkl = next((n for n in z.namelist() if n.endswith("data.pkl")), None)
                if pkl:
                    write("pickle", f"abuse_{pt.stem}.pkl", z.read(pkl))
        except (zipfile.BadZipFile, NotImplementedError, OSError):
            pass


if __name__ == "__main__":
    seeds_safetensors()
    seeds_text()
    seeds_tokenizer_files()
    seeds_json()
    seeds_session()
    seeds_flags()
    seeds_torch()
