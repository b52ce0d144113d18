#pragma once
// What a template can call without defining it: filters (value|trim), tests (value is defined), the
// methods of strings, lists and dicts ('x'.strip(), d.items()), and the globals transformers provides
// (range, namespace, raise_exception, strftime_now, dict).
#include <string>

#include "chat/jinja_ast.h"

namespace kvc::jinja {

FilterFn find_filter(const std::string& name);  // null when there is no such filter
TestFn find_test(const std::string& name);

// obj.name as jinja2's sandboxed getattr sees it: a method of a string, list or dict, else a dict's
// key, a namespace's attribute; undefined (with jinja2's message) when there is none. Throws for an
// undefined `obj`, as jinja2's Undefined does.
Value get_attribute(const Value& object, const std::string& name);
// obj[key]: an item (negative indices count from the end), else an attribute, else undefined.
Value get_item(const Value& object, const Value& key);
// obj[start:stop:step] with Python's slice rules, for strings (by character), lists and tuples; throws for
// anything else, as Python does.
Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step);

// Iterating a value in a for loop or a filter: lists and tuples, a dict's keys, a string's characters,
// nothing for undefined. Throws for what Python cannot iterate.
List iterate(const Value& value);

// 'pattern' % args (printf style): %s %r %d %i %f %e %g with flags, width and precision.
std::string percent_format(const std::string& pattern, const Value& args);

// The globals every render starts with, besides its own variables.
std::vector<std::pair<std::string, Value>> global_functions();

}  // namespace kvc::jinja
