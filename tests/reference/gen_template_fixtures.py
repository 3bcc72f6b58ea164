#!/usr/bin/env python3
"""Render real chat templates with jinja2 exactly as HF transformers does and
write the inputs + expected outputs as JSON fixtures for tests/test-chat-template.c.

The environment mirrors transformers' `_compile_jinja_template`:
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols]) with its `tojson` filter (json.dumps with
ensure_ascii=False and indent/separators/sort_keys options), `raise_exception`
and `strftime_now` globals. Variables: messages, add_generation_prompt,
bos_token, eos_token, tools=None, documents=None, then the case's `extra`.
strftime_now is pinned to a fixed UTC instant (the C side pins the same one
with hone_chat_template_set_now()).

Usage: python3 tests/reference/gen_template_fixtures.py   (pins: jinja2==3.1.6)
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

assert jinja2.__version__ == "3.1.6", jinja2.__version__

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "templates")
FIXED_NOW = 1721995200  # 2024-07-26 12:00:00 UTC


def make_env():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(FIXED_NOW, datetime.timezone.utc).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = make_env()


def render(source, case):
    variables = {"tools": None, "documents": None}
    variables.update(case.get("extra") or {})
    try:
        tmpl = ENV.from_string(source)
        out = tmpl.render(messages=case["messages"],
                          add_generation_prompt=case["add_generation_prompt"],
                          bos_token=case["bos_token"], eos_token=case["eos_token"],
                          **variables)
        case["expected"] = out
    except TemplateError as e:
        # TemplateSyntaxError/TemplateAssertionError are TemplateErrors too.
        kind = "syntax" if isinstance(e, jinja2.TemplateSyntaxError) else \
            ("raise" if type(e) is TemplateError else "runtime")
        case["error"] = {"kind": kind, "message": str(e)}
    except Exception as e:  # TypeError, OverflowError, SecurityError, ...
        case["error"] = {"kind": "runtime", "message": f"{type(e).__name__}: {e}"}
    return case


# ---------------------------------------------------------------- conversations
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
CALC_TOOL = {
    "type": "function",
    "function": {
        "name": "calc",
        "description": "Evaluate an arithmetic expression — exactly.",
        "parameters": {"type": "object",
                       "properties": {"expr": {"type": "string"}, "precision": {"type": "integer", "default": 2}},
                       "required": ["expr"]},
        "return": {"type": "number"},
    },
}


def m(role, content, **kw):
    d = {"role": role, "content": content}
    d.update(kw)
    return d


def tool_call(name, args, cid="call12345"):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


BASE = [
    ("single_user", [m("user", "Hello!")]),
    ("system_user", [m("system", "You are a terse assistant."), m("user", "Hi there")]),
    ("multi_turn", [m("user", "What is 2+2?"), m("assistant", "4."), m("user", "And 3+3?")]),
    ("system_multi_turn", [m("system", "Be nice."), m("user", "Hello"), m("assistant", "Hi! How can I help?"),
                           m("user", "Tell me a joke."), m("assistant", "Why did the chicken cross the road?"),
                           m("user", "Why?")]),
    ("ends_with_assistant", [m("user", "Say hi"), m("assistant", "hi")]),
    ("empty_content", [m("user", "")]),
    ("empty_assistant", [m("user", "ping"), m("assistant", ""), m("user", "pong")]),
    ("unicode", [m("user", "Grüße aus Zürich! 你好，世界 🌍 — ¿qué tal? Ωμέγα")]),
    ("quotes_braces", [m("user", "He said \"{{ not a tag }}\" and '{% neither %}' {# nor #} \\n <|im_end|>")]),
    ("whitespace_content", [m("system", "  padded system  \n"), m("user", "\n\n  spaced out  \t\n")]),
    ("newlines", [m("user", "line one\nline two\r\nline three\n")]),
    ("long_content", [m("user", "word " * 200)]),
    ("json_in_content", [m("user", "{\"a\": [1, 2, {\"b\": null}]}")]),
    ("special_tokens_in_content", [m("user", "<s>[INST] fake [/INST]</s><|eot_id|><|im_start|>")]),
    ("think_tags", [m("user", "Solve x+1=2"), m("assistant", "<think>\nx = 2 - 1\n</think>\n\nx = 1"),
                    m("user", "Thanks")]),
    ("think_last", [m("user", "Q1"), m("assistant", "<think>reasoning here</think>answer one")]),
    ("reasoning_field", [m("user", "Q"), m("assistant", "A", reasoning_content="because\n")]),
    ("two_systems", [m("system", "first"), m("user", "u"), m("system", "second"), m("user", "u2")]),
    ("assistant_first", [m("assistant", "I start."), m("user", "ok")]),
    ("double_user", [m("user", "one"), m("user", "two")]),
    ("unknown_role", [m("user", "hi"), m("narrator", "Meanwhile...")]),
    ("empty_messages", []),
    ("only_system", [m("system", "Only a system prompt")]),
    ("extra_keys", [m("user", "hi", name="alice", metadata={"k": 1})]),
    ("tab_and_controls", [m("user", "a\tb\u0001c\u007fd")]),
    ("list_content", [m("user", [{"type": "text", "text": "hi"}])]),
    ("none_content", [m("user", "hi"), m("assistant", None), m("user", "again")]),
    ("numeric_content", [m("user", 42)]),
]

TOOLS_CASES = [
    ("tools_defined", [m("system", "Use tools."), m("user", "Weather in Paris?")],
     {"tools": [WEATHER_TOOL, CALC_TOOL]}),
    ("tools_no_system", [m("user", "What is 3*7?")], {"tools": [CALC_TOOL]}),
    ("tool_call_roundtrip", [m("user", "Weather in Paris?"),
                             m("assistant", "", tool_calls=[tool_call("get_weather", {"city": "Paris", "unit": "celsius"})]),
                             m("tool", "{\"temp\": 21.5, \"sky\": \"clear\"}", tool_call_id="call12345"),
                             m("assistant", "It is 21.5 °C and clear.")],
     {"tools": [WEATHER_TOOL]}),
    ("tool_call_with_text", [m("user", "Calc 1/3"),
                             m("assistant", "Let me compute.", tool_calls=[tool_call("calc", {"expr": "1/3", "precision": 4})]),
                             m("tool", "0.3333", tool_call_id="call12345")],
     {"tools": [CALC_TOOL]}),
    ("two_tool_calls", [m("user", "Paris and Rome?"),
                        m("assistant", "", tool_calls=[tool_call("get_weather", {"city": "Paris"}, "callAAAAA"),
                                                       tool_call("get_weather", {"city": "Rome"}, "callBBBBB")]),
                        m("tool", "sunny", tool_call_id="callAAAAA"), m("tool", "rainy", tool_call_id="callBBBBB")],
     {"tools": [WEATHER_TOOL]}),
    ("tool_args_string", [m("user", "x"),
                          m("assistant", None, tool_calls=[tool_call("calc", "{\"expr\": \"2+2\"}")]),
                          m("tool", "4", tool_call_id="call12345")],
     {"tools": [CALC_TOOL]}),
    ("tools_in_system", [m("user", "Hi")], {"tools": [WEATHER_TOOL], "tools_in_user_message": False}),
    ("builtin_tools", [m("user", "Search the web")],
     {"builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"]}),
    ("builtin_tool_call", [m("user", "Search"),
                           m("assistant", "", tool_calls=[tool_call("brave_search", {"query": "jinja"})]),
                           m("ipython", {"result": "ok"})],
     {"builtin_tools": ["brave_search"]}),
    ("tools_empty_messages", [], {"tools": [WEATHER_TOOL]}),
    ("bad_tool_call_id", [m("user", "x"),
                          m("assistant", "", tool_calls=[tool_call("calc", {"expr": "1"}, "short")])],
     {"tools": [CALC_TOOL]}),
]

EXTRA_CASES = [
    ("date_string", [m("user", "What day is it?")], {"date_string": "01 Jan 2030"}),
    ("thinking_off", [m("user", "Quick answer")], {"enable_thinking": False}),
    ("thinking_on", [m("user", "Think hard")], {"enable_thinking": True}),
    ("documents", [m("user", "Summarise")],
     {"documents": [{"doc_id": 1, "text": "Doc one."}, {"doc_id": "b", "text": "Doc \"two\"."}],
      "controls": {"citations": True, "hallucinations": False}}),
    ("granite_thinking", [m("user", "Why?")], {"thinking": True}),
    ("typed_tool_params", [m("user", "x")],
     {"tools": [{"type": "function", "function": {"name": "g", "description": "types",
       "parameters": {"type": "object", "properties": {
         "a": {"type": "array", "description": "list of ints", "items": {"type": "integer"}},
         "b": {"type": ["string", "null"], "description": "union"},
         "c": {"type": "object", "additionalProperties": {"type": "number"}, "description": " map "}}}}}]}),
]


def model_cases():
    cases = []
    for name, msgs in BASE:
        for agp in (True, False):
            cases.append({"name": f"{name}/agp={int(agp)}", "messages": msgs, "add_generation_prompt": agp,
                          "bos_token": "<s>", "eos_token": "</s>", "extra": {}})
    for name, msgs, extra in TOOLS_CASES + EXTRA_CASES:
        cases.append({"name": name, "messages": msgs, "add_generation_prompt": True,
                      "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "extra": extra})
    return cases


TEMPLATES = [
    # (fixture name, template file, provenance)
    ("smollm2", "smollm2-135m-instruct.jinja",
     "tokenizer.chat_template of ~/.cache/hone/models/SmolLM2-135M-Instruct.Q4_1.gguf (read with gguf 0.19.0)"),
    ("llama3", "llama-3-8b-instruct.jinja",
     "meta-llama/Meta-Llama-3-8B-Instruct tokenizer_config.json (as quoted in kalosm's chat_template tests)"),
    ("llama3.3", "llama-3.3-70b-instruct.jinja",
     "llama.cpp models/templates/meta-llama-Llama-3.3-70B-Instruct.jinja (the Llama-3.1 template: tools, builtin tools, date_string)"),
    ("llama3.2", "llama-3.2-3b-instruct.jinja",
     "llama.cpp models/templates/meta-llama-Llama-3.2-3B-Instruct.jinja (strftime_now)"),
    ("qwen2.5", "qwen2.5-7b-instruct.jinja",
     "Qwen2.5 Instruct tokenizer_config.json chat_template (as quoted verbatim in kalosm's tests)"),
    ("qwen3", "qwen3-0.6b.jinja", "llama.cpp models/templates/Qwen-Qwen3-0.6B.jinja"),
    ("mistral-v0.1", "mistral-7b-instruct-v0.1.jinja",
     "mistralai/Mistral-7B-Instruct-v0.1 tokenizer_config.json (raise_exception on role alternation)"),
    ("mistral-system", "mistral-instruct-system.jinja",
     "Mistral Instruct template with optional system message (as quoted in kalosm's tests)"),
    ("mistral-nemo", "mistral-nemo-instruct-2407.jinja",
     "llama.cpp models/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja (v0.3-style tool calling)"),
    ("gemma2", "gemma-2-2b-it.jinja", "llama.cpp models/templates/google-gemma-2-2b-it.jinja"),
    ("hermes3", "hermes-3-llama-3.1-8b-tool-use.jinja",
     "llama.cpp models/templates/NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja (recursive macro)"),
    ("granite3.3", "granite-3.3-2b-instruct.jinja",
     "llama.cpp models/templates/ibm-granite-granite-3.3-2B-Instruct.jinja (strftime_now, documents)"),
]


# ------------------------------------------------------- feature mini-templates
# Small templates that pin down jinja2 semantics the model templates only touch
# lightly. Each renders with a fixed context (messages below + extra).
FEATURE_MESSAGES = [m("system", "sys"), m("user", "Hello World"), m("assistant", " reply  ")]
FEATURE_EXTRA = {
    "n": 7, "f": 2.5, "neg": -3, "s": "  Mixed Case text  ", "empty": "", "lst": [3, 1, 2], "strs": ["b", "A", "c", "a"],
    "d": {"z": 1, "a": [1, 2], "m": {"k": "v"}}, "t": True, "no": None, "fl": 0.1, "big": 1e20, "small": 1.5e-7,
    "users": [{"name": "ann", "age": 30, "admin": True}, {"name": "bob", "age": 25, "admin": False},
              {"name": "Cat", "age": 35}],
    "uni": "Grüße 你好 🌍",
}
FEATURES = [
    # whitespace control, trim_blocks, lstrip_blocks
    "a\n  {% if true %}\n    b\n  {% endif %}\nc",
    "a  {%- if true -%}  b  {%- endif -%}  c",
    "x {{- ' y ' -}} z",
    "{% for i in lst %}\n  {{ i }}\n{% endfor %}",
    "  {%+ if true %}kept{% endif %}",
    "{% if true +%}\nno-trim{% endif %}",
    "line\n    {# comment #}\nnext",
    "a {#- c -#} b",
    "{% raw %}{{ not evaluated }} {% if %}{% endraw %}",
    "  {% raw %}  x  {% endraw %}\ny",
    "{{ 'a' }}\n{{ 'b' }}\n",
    "a\r\nb\rc\n",
    "  \t{% set x = 1 %}  after",
    "text {{ n }}\n{%- if n %} yes{% endif %}",
    # literals and arithmetic
    "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }}",
    "{{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 1.5 + 1 }} {{ 10 / 5 }} {{ 1e3 }} {{ 1_000 }} {{ 0x1F }} {{ 3.0 * 2 }}",
    "{{ 0.1 + 0.2 }} {{ 1/3 }} {{ big }} {{ small }} {{ 1e16 }} {{ 1e15 }} {{ 123456789.0 }} {{ -0.0 }} {{ 2.5e-5 }}",
    "{{ 'a' ~ 1 ~ none ~ true }} {{ 'x' * 3 }} {{ [1] * 2 }} {{ [1, 2] + [3] }} {{ 'ab' + 'cd' }}",
    "{{ 'esc\\n\\t\\'\\\"\\\\\\x41\\u00e9\\101' }}|{{ \"dq 'in' \" }}|{{ 'unk \\d' }}",
    "{{ 'con' 'cat' \"enated\" }}",
    "{{ true }} {{ True }} {{ false }} {{ none }} {{ None }} {{ [] }} {{ {} }} {{ () }} {{ (1,) }} {{ (1, 'a') }}",
    "{{ [1, 'two', none, true, 2.0, [3], {'k': 'v'}] }}",
    "{{ {'a': 1, 'b': [1, 2], 1: 'x', none: 2} }}",
    "{{ \"it's\" }} {{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'nl\\nx', 'uni é', 'tab\\t'] }}",
    "{{ n > 3 and n < 10 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ [1,2] == [1,2] }} {{ 'abc' < 'abd' }}",
    "{{ 'b' in 'abc' }} {{ 2 in lst }} {{ 'z' in d }} {{ 'q' not in d }} {{ not 1 in lst }}",
    "{{ 1 if t else 2 }} {{ 'x' if no }}|{{ 'y' if false else 'z' if true else 'w' }}",
    "{{ n or 'x' }} {{ 0 or 'x' }} {{ empty and 'never' }} {{ n and 'both' }} {{ none or [] }}",
    "{{ -n }} {{ +n }} {{ not n }} {{ not not empty }} {{ -f }}",
    # attribute / item access
    "{{ d.z }} {{ d['a'][1] }} {{ d.a.0 }} {{ d.m.k }} {{ d.missing }}|{{ d['missing'] }}|{{ lst[5] }}|{{ lst[-1] }}",
    "{{ messages[0].role }} {{ messages[-1]['content'] }} {{ messages[1:]|length }} {{ messages[::-1][0].role }}",
    "{{ lst[1:] }} {{ lst[:-1] }} {{ lst[::2] }} {{ lst[::-1] }} {{ uni[1:4] }} {{ uni[::-1] }} {{ 'hello'[1:3] }} {{ 'abc'[-1] }}",
    "{{ lst[10:] }} {{ lst[-10:1] }} {{ 'abcdef'[5:1:-2] }} {{ uni|length }} {{ uni[7] }}",
    "{{ d.missing is defined }} {{ undefined_name is undefined }} {{ undefined_name }}|{{ undefined_name|length }}",
    "{{ d.missing.deeper }}",
    "{{ undefined_name.attr }}",
    "{{ undefined_name + 1 }}",
    "{{ lst + none }}",
    "{{ 1 / 0 }}",
    "{{ 'a' < 1 }}",
    "{{ 1 in none }}",
    # filters
    "{{ s|trim }}|{{ s|lower }}|{{ s|upper }}|{{ s|title }}|{{ s|capitalize }}|{{ 'x-y z(w'|title }}",
    "{{ s|trim('  M') }}|{{ 'xxhixx'|trim('x') }}|{{ s|replace('e', 'E') }}|{{ 'aaa'|replace('a', 'b', 2) }}",
    "{{ lst|length }} {{ d|length }} {{ 'abc'|count }} {{ lst|first }} {{ lst|last }} {{ 'xyz'|first }} {{ []|first }}|",
    "{{ strs|join(', ') }} {{ lst|join }} {{ users|join('; ', attribute='name') }}",
    "{{ no|default('dflt') }} {{ undefined_name|default('dflt') }} {{ empty|default('e', true) }} {{ empty|d('x') }}|",
    "{{ 'abc'|list }} {{ d|list }} {{ d|items|list }} {{ lst|reverse|list }} {{ 'abc'|reverse }}",
    "{{ users|selectattr('admin')|map(attribute='name')|list }} {{ users|rejectattr('admin')|map(attribute='name')|join(',') }}",
    "{{ users|selectattr('age', 'gt', 26)|map(attribute='name')|list }} {{ users|selectattr('name', 'equalto', 'bob')|list|length }}",
    "{{ users|selectattr('admin', 'defined')|list|length }} {{ users|selectattr('admin', 'undefined')|map(attribute='name')|first }}",
    "{{ lst|select('odd')|list }} {{ lst|reject('odd')|list }} {{ [0, 1, '', 'a', none]|select|list }} {{ lst|map('string')|join('-') }}",
    "{{ users|map(attribute='missing', default='?')|list }} {{ ['1', '2']|map('int')|sum }}",
    "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(5) }} {{ 3.9|int }} {{ '3.5'|float }} {{ 'x'|float }} {{ 2|float }}",
    "{{ -3|abs }} {{ neg|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 3|round }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }}",
    "{{ 'x'|safe }} {{ '<a>'|e }} {{ '<a href=\"x\">&</a>'|escape }}",
    "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', blank=true) }}|{{ ''|indent(first=true) }}",
    "{{ 'one two, three-four'|wordcount }} {{ [1, 2, 1, 3, 2]|unique|list }} {{ strs|unique|list }} {{ strs|unique(case_sensitive=true)|list }}",
    "{{ lst|sort }} {{ strs|sort }} {{ strs|sort(case_sensitive=true) }} {{ lst|sort(reverse=true) }} {{ users|sort(attribute='age')|map(attribute='name')|list }}",
    "{{ d|dictsort }} {{ {'b': 1, 'A': 2, 'a': 3}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) }}",
    "{{ [1,2,3,4,5]|batch(2)|list }} {{ [1,2,3]|batch(2, 'x')|list }}",
    "{{ lst|sum }} {{ lst|min }} {{ lst|max }} {{ strs|min }} {{ users|sum(attribute='age') }}",
    "{{ d|tojson }}|{{ users[0]|tojson(indent=2) }}|{{ [1, 'é', none, true, 1.5]|tojson }}|{{ 'q\"\\\\\\n\\u0001'|tojson }}",
    "{{ d|tojson(indent=4) }}|{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ [1, [2]]|tojson(separators=(',', ':')) }}|{{ 'é'|tojson(ensure_ascii=true) }}",
    "{{ []|tojson(indent=2) }} {{ {}|tojson(indent=2) }} {{ {'a': []}|tojson(indent=1) }} {{ 1e20|tojson }} {{ (1, 2)|tojson }}",
    "{{ undefined_name|tojson }}",
    "{{ n|string ~ '!' }} {{ lst|string }} {{ none|string }} {{ 1.0|string }}",
    "{{ 'hello'|upper|lower|title }} {{ s|trim|length }} {{ lst|map('abs')|list }}",
    "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxaxx'.strip('x') }}",
    "{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith('bc') }} {{ 'abc'.startswith(('x', 'a')) }} {{ s.upper() }} {{ s.lower() }} {{ \"they're bill's\".title() }}",
    "{{ 'aaa'.replace('a', 'b') }} {{ 'a-b'.replace('-', '') }} {{ 'abc'.find('c') }} {{ 'abcb'.count('b') }} {{ ', '.join(['x', 'y']) }} {{ 'hello world'.capitalize() }}",
    "{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ 'a</think>b'.split('</think>')[-1] }}|{{ '123'.isdigit() }} {{ 'ab'.isalpha() }} {{ 'AB'.isupper() }}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {{ d.keys()|list }} {{ d.values()|list|length }} {{ d.get('z') }} {{ d.get('q', 'dflt') }} {{ d.get('q') }}",
    # tests
    "{{ n is number }} {{ f is number }} {{ t is number }} {{ n is integer }} {{ f is integer }} {{ t is integer }} {{ f is float }} {{ s is string }} {{ n is string }}",
    "{{ d is mapping }} {{ lst is mapping }} {{ lst is iterable }} {{ s is iterable }} {{ n is iterable }} {{ lst is sequence }} {{ d is sequence }} {{ undefined_name is iterable }}",
    "{{ t is boolean }} {{ t is true }} {{ 1 is true }} {{ false is false }} {{ no is none }} {{ 0 is none }} {{ n is odd }} {{ n is even }} {{ 9 is divisibleby 3 }}",
    "{{ 2 is in lst }} {{ 'a' is in 'cat' }} {{ n is eq 7 }} {{ n is equalto 8 }} {{ n is ne 7 }} {{ n is gt 3 }} {{ n is lt 3 }} {{ n is ge 7 }} {{ n is le 6 }}",
    "{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ n is not none }} {{ not n is none }}",
    "{{ 'x' is startingwith 'x' }}",
    "{{ range is callable }} {{ n is callable }} {{ no is sameas none }} {{ n is defined and n > 3 }}",
    # statements
    "{% if n > 10 %}big{% elif n > 5 %}mid{% else %}small{% endif %}",
    "{% for x in lst %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }} {% endfor %}",
    "{% for x in lst %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %} {% for x in lst %}{{ loop.cycle('a', 'b') }}{% endfor %}",
    "{% for x in [] %}never{% else %}empty-else{% endfor %} {% for x in lst if x > 1 %}{{ x }}:{{ loop.index }}:{{ loop.length }}:{{ loop.last }} {% endfor %}",
    "{% for c in 'héllo' %}{{ c }}.{% endfor %} {% for k in d %}{{ k }}{% endfor %} {% for k, v in d|items %}{{ k }}{% endfor %}",
    "{% for a, b in [[1, 2], (3, 4), 'xy'] %}{{ a }}{{ b }} {% endfor %}",
    "{% for x in lst %}{% for y in lst %}{% if y > x %}{% break %}{% endif %}{{ x }}{{ y }} {% endfor %}{% endfor %}",
    "{% for x in range(10) %}{% if x is odd %}{% continue %}{% endif %}{{ x }}{% endfor %} {{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }}",
    "{% for x in lst %}{{ loop.depth }}{% for y in [1] %}{{ loop.depth }}{{ loop.depth0 }}{% endfor %}{% endfor %}",
    "{% set x = 1 %}{% for i in lst %}{% set x = i %}{% endfor %}{{ x }} {% if true %}{% set y = 5 %}{% endif %}{{ y }}",
    "{% set ns = namespace(total=0, items=[]) %}{% for i in lst %}{% set ns.total = ns.total + i %}{% set ns.items = ns.items + [i * 2] %}{% endfor %}{{ ns.total }} {{ ns.items }} {{ ns.missing }}|",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }} {% set t = 1, 2 %}{{ t }} {% set c = [3, 4] %}{% set p, q = c %}{{ q }}",
    "{% set block %}  inner {{ n }}  {% endset %}[{{ block }}] {% set up | upper | trim %} shout {% endset %}[{{ up }}]",
    "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('ann') }} {{ greet('bob', '?') }} {{ greet(punct='.', name='cat') }}",
    "{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1)|int }}{% endif %}{% endmacro %}{{ fact(6) }}",
    "{% macro show() %}{{ n }}{% endmacro %}{% set n = 99 %}{{ show() }}",
    "{% with a = 5, b = n %}{{ a + b }}{% endwith %}{{ a }}|",
    "{% filter upper %}shout {{ 'this' }}{% endfilter %}",
    "{{ dict(a=1, b='x') }} {{ namespace(a=1).a }} {{ dict(d, extra=1)|length }}",
    "{{ raise_exception('custom failure: ' ~ n) }}",
    "{% if messages|length > 2 %}{{ raise_exception('too many') }}{% endif %}ok",
    "{{ strftime_now('%Y-%m-%d %H:%M %a %b %d') }}",
    "{{ lst.append(4) }}",
    "{{ d.update({'x': 1}) }}{{ d }}",
    "{{ ''.__class__ }}|{{ lst.__len__ }}|",
    "{{ range(100001)|length }}",
    "{{ range(100000)|length }}",
    "{% for m in messages %}{{ m.role }}:{{ m.content|trim }}\n{% endfor %}",
    "{{ messages|selectattr('role', 'equalto', 'user')|list|length }} {{ messages|map(attribute='role')|join(',') }}",
    "{{ 'Conversation: ' + messages[1].content | trim + '.' }}",
    "{{ messages[0] }} {{ messages[5] is defined }} {{ (messages|last).content }}",
    # scoping
    "{% set x = 0 %}{% for i in [1, 2, 3] %}{% set x = x + i %}{{ x }},{% endfor %}{{ x }}",
    "{% for i in [1, 2] %}{% if i == 2 %}[{{ y }}]{% endif %}{% set y = i %}{% endfor %}[{{ y }}]",
    "{% for a in [1, 2] %}{% for a in [3] %}{{ a }}{% endfor %}{{ a }}{% endfor %}{{ a }}|",
    "{% for m in messages %}{% set role = m.role %}{% endfor %}{{ role }}|{% set ns = namespace(r='') %}{% for m in messages %}{% set ns.r = m.role %}{% endfor %}{{ ns.r }}",
    "{% macro m(x) %}{% set y = x * 2 %}{{ y }}{% endmacro %}{{ m(2) }}{{ y }}|",
    "{% set messages = messages[1:] %}{{ messages|length }}{% for m in messages %}{{ loop.index }}{% endfor %}",
    "{% if true %}{% set inner = 'set in if' %}{% endif %}{{ inner }}",
    # whitespace details
    "a\n  {%- if true %}\n  b\n  {%- endif %}\nc",
    "a\n\t{% if true %}\n\tb\n\t{% endif %}\n",
    "x   {% if true %}y{% endif %}   \n   {% if true %}z{% endif %}",
    "{{ 1 }}\n    {{ 2 }}\n{% if true %}\n    {{ 3 }}\n{% endif %}",
    "  {#- comment -#}  \n  text",
    "\u3000{% if true %}wide{% endif %}\u00a0{% if true %}nbsp{% endif %}",
    "{%- raw -%}  raw  {%- endraw -%}  |",
    "{% for i in [1, 2] -%}\n  {{ i }}\n{%- endfor %}",
    "{% if true %}  \n{% endif %}x",
    "a {%- if true +%} \n b {%+ endif -%} c",
    # literals and conversions
    "{{ 007 }} {{ 0b101 }} {{ 0o17 }} {{ 1_0.5 }} {{ 1e-3 }} {{ .5 if false else 'no-dot' }}",
    "{{ '%s' }} {{ \"a\" 'b' }} {{ 'a\\\nb' }}",
    "{{ [1, 2][0] }}{{ {'a': 1}['a'] }}{{ (1, 2)[1] }}{{ 'abc'[1] }}{{ [][0] is defined }}",
    "{{ 1 == True }} {{ 0 == False }} {{ 1.0 == 1 }} {{ 'a' == 'a' }} {{ none == none }} {{ [1] == (1,) }} {{ {'a': 1} == {'a': 1.0} }}",
    "{{ 3 // 2 * 2 }} {{ 2 * 3 ** 2 }} {{ (2 * 3) ** 2 }} {{ 10 - 2 - 3 }} {{ 2 ** 0.5 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
    "{{ true + 1 }} {{ 'ab' * 0 }} {{ [] * 3 }} {{ 1 ~ 2 }} {{ 'x' ~ [1] }} {{ 0.1 * 3 }}",
    "{{ messages[0].content.upper() }} {{ messages | map(attribute='content') | map('trim') | join('|') }}",
    "{{ messages|selectattr('content')|list|length }} {{ messages|rejectattr('role', 'in', ['user', 'system'])|map(attribute='role')|first }}",
    "{{ '  x  '.strip() ~ '|' ~ 'a-b-c'.split('-', 1)|string ~ '|' ~ 'Hello'.lower().startswith('he') }}",
    "{{ d|items|map('first')|join }} {{ d.items()|list|length }} {{ users|map(attribute='name')|map('upper')|list }}",
    "{{ users[0]['name'] }} {{ users[0].name }} {{ users|first|attr('name') }} {{ users.0.age }}",
    "{{ lst|join(', ') }} {{ lst|map('string')|join }} {{ (lst|sort)[0] }} {{ lst|sort|first }} {{ lst|max }} {{ lst|min }}",
    "{{ s|trim|replace(' ', '_')|lower }} {{ s|wordcount }} {{ s|length }} {{ s|center(30) }}|",
    "{{ 'a' in messages[1].content }} {{ 'Hello' in messages[1].content }} {{ messages[1].content.find('World') }}",
    "{{ f|round(1) }} {{ 1.25|round(1) }} {{ 1.35|round(1) }} {{ -2.5|round }} {{ 1234.5678|round(-2) }} {{ 0.5|round }}",
    "{% for x in 'ab' %}{{ loop.revindex }}{{ loop.cycle('x', 'y', 'z') }}{% endfor %}{% for k, v in {'a': 1}.items() %}{{ k }}{{ v }}{% endfor %}",
    "{% for x in users if x.age > 26 %}{{ x.name }}{{ loop.length }}{% else %}none{% endfor %}",
    "{% for x in none %}{% endfor %}",
    "{% for a, b in lst %}{% endfor %}",
    "{{ no.missing }}|{{ t.foo }}|{{ lst.missing }}|{{ 'x'.missing }}|",
    "{{ namespace() }}",
    "{{ lst[1:2:0] }}",
    "{{ [1, 2, 3][True] }} {{ 'abc'[False] }}",
    "{{ {'a': 1}|tojson(indent='--') }} {{ [1, {'b': [true, none]}]|tojson(indent=0) }}",
    "{{ {1: 'a', 2.5: 'b', true: 'c', none: 'd'}|tojson }}",
    "{{ 'x' is string and 1 is number and [] is sequence and {} is mapping and none is none }}",
    "{{ x is not defined }} {{ n is not defined }} {{ not x is defined }} {{ (not x) is defined }}",
    "{{ 5 is divisibleby(5) }} {{ 4 is odd }} {{ 3.0 is odd }} {{ -3 is odd }} {{ 'AbC' is upper }}",
    # syntax errors
    "{% if true %}unterminated",
    "{{ 1 + }}",
    "{% for x in %}{% endfor %}",
    "{% endif %}",
    "{{ x | nosuchfilter }}",
    "{{ x is nosuchtest }}",
    "{% unknowntag %}",
    "{{ 'unterminated }}",
    "{# unterminated comment",
    "{{ (1 }}",
    "{{ a ]] }}",
    "{% set %}",
    "hello {{ 'world' }",
]


def feature_cases():
    cases = []
    for i, src in enumerate(FEATURES):
        cases.append({"name": f"feature-{i:03d}", "source": src, "messages": FEATURE_MESSAGES,
                      "add_generation_prompt": True, "bos_token": "<s>", "eos_token": "</s>",
                      "extra": FEATURE_EXTRA})
    return cases


def main():
    total = 0
    index = []
    for name, fname, prov in TEMPLATES:
        with open(os.path.join(DATA, fname), encoding="utf-8") as fh:
            source = fh.read()
        cases = [render(source, dict(c)) for c in model_cases()]
        out = {"template": fname, "provenance": prov, "jinja2": jinja2.__version__, "now": FIXED_NOW, "cases": cases}
        with open(os.path.join(DATA, f"{name}.json"), "w", encoding="utf-8") as fh:
            json.dump(out, fh, ensure_ascii=False, indent=1)
            fh.write("\n")
        nerr = sum(1 for c in cases if "error" in c)
        print(f"{name}: {len(cases)} cases ({nerr} expected errors)")
        total += len(cases)
        index.append(f"{name}.json")
    cases = [render(c["source"], c) for c in feature_cases()]
    with open(os.path.join(DATA, "features.json"), "w", encoding="utf-8") as fh:
        json.dump({"jinja2": jinja2.__version__, "now": FIXED_NOW, "cases": cases}, fh, ensure_ascii=False, indent=1)
        fh.write("\n")
    nerr = sum(1 for c in cases if "error" in c)
    print(f"features: {len(cases)} cases ({nerr} expected errors)")
    total += len(cases)
    index.append("features.json")
    with open(os.path.join(DATA, "index.txt"), "w") as fh:
        fh.write("\n".join(index) + "\n")
    print(f"total {total}")


if __name__ == "__main__":
    sys.exit(main())
