package dev.idmint.client;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small reader of the JSON idmint answers: objects, arrays, strings,
 * numbers, booleans and null. Numbers are kept as their text (idmint sends
 * 64-bit IDs as strings, but counts as numbers), so nothing is rounded
 * through a double. It refuses anything that is not one JSON value with a
 * {@link IllegalArgumentException} naming the offset.
 */
final class Json {
    private final String s;
    private int i;

    private Json(String s) {
        this.s = s;
    }

    /** Parses one JSON value: Map, List, String, Json.Num, Boolean or null. */
    static Object parse(String text) {
        Json p = new Json(text);
        p.ws();
        Object v = p.value(0);
        p.ws();
        if (p.i != text.length()) {
            throw p.bad("trailing characters");
        }
        return v;
    }

    /** Parses one JSON object. */
    @SuppressWarnings("unchecked")
    static Map<String, Object> object(String text) {
        Object v = parse(text);
        if (!(v instanceof Map)) {
            throw new IllegalArgumentException("want a JSON object");
        }
        return (Map<String, Object>) v;
    }

    /** A JSON number, as written. */
    record Num(String text) {
        long longValue() {
            return Long.parseLong(text);
        }

        @Override
        public String toString() {
            return text;
        }
    }

    private IllegalArgumentException bad(String why) {
        return new IllegalArgumentException("JSON at offset " + i + ": " + why);
    }

    private void ws() {
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                return;
            }
            i++;
        }
    }

    private Object value(int depth) {
        if (depth > 32) {
            throw bad("nested too deep");
        }
        if (i >= s.length()) {
            throw bad("unexpected end");
        }
        char c = s.charAt(i);
        switch (c) {
            case '{':
                return obj(depth);
            case '[':
                return arr(depth);
            case '"':
                return str();
            case 't':
                return lit("true", Boolean.TRUE);
            case 'f':
                return lit("false", Boolean.FALSE);
            case 'n':
                return lit("null", null);
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    return num();
                }
                throw bad("unexpected '" + c + "'");
        }
    }

    private Object lit(String word, Object v) {
        if (!s.startsWith(word, i)) {
            throw bad("want " + word);
        }
        i += word.length();
        return v;
    }

    private Num num() {
        int start = i;
        if (s.charAt(i) == '-') {
            i++;
        }
        while (i < s.length()) {
            char c = s.charAt(i);
            if ((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
                i++;
            } else {
                break;
            }
        }
        String t = s.substring(start, i);
        if (t.equals("-")) {
            throw bad("bad number");
        }
        return new Num(t);
    }

    private String str() {
        i++; // the opening quote
        StringBuilder b = null;
        int start = i;
        while (true) {
            if (i >= s.length()) {
                throw bad("unterminated string");
            }
            char c = s.charAt(i);
            if (c == '"') {
                String out = b == null ? s.substring(start, i) : b.append(s, start, i).toString();
                i++;
                return out;
            }
            if (c < 0x20) {
                throw bad("control character in string");
            }
            if (c != '\\') {
                i++;
                continue;
            }
            if (b == null) {
                b = new StringBuilder();
            }
            b.append(s, start, i);
            if (i + 1 >= s.length()) {
                throw bad("unterminated escape");
            }
            char e = s.charAt(i + 1);
            i += 2;
            switch (e) {
                case '"', '\\', '/' -> b.append(e);
                case 'b' -> b.append('\b');
                case 'f' -> b.append('\f');
                case 'n' -> b.append('\n');
                case 'r' -> b.append('\r');
                case 't' -> b.append('\t');
                case 'u' -> {
                    if (i + 4 > s.length()) {
                        throw bad("short \\u escape");
                    }
                    try {
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                    } catch (NumberFormatException x) {
                        throw bad("bad \\u escape");
                    }
                    i += 4;
                }
                default -> throw bad("bad escape \\" + e);
            }
            start = i;
        }
    }

    private Map<String, Object> obj(int depth) {
        i++;
        Map<String, Object> m = new LinkedHashMap<>();
        ws();
        if (i < s.length() && s.charAt(i) == '}') {
            i++;
            return m;
        }
        while (true) {
            ws();
            if (i >= s.length() || s.charAt(i) != '"') {
                throw bad("want a member name");
            }
            String k = str();
            ws();
            if (i >= s.length() || s.charAt(i) != ':') {
                throw bad("want ':'");
            }
            i++;
            ws();
            m.put(k, value(depth + 1));
            ws();
            if (i >= s.length()) {
                throw bad("unterminated object");
            }
            char c = s.charAt(i++);
            if (c == '}') {
                return m;
            }
            if (c != ',') {
                throw bad("want ',' or '}'");
            }
        }
    }

    private List<Object> arr(int depth) {
        i++;
        List<Object> l = new ArrayList<>();
        ws();
        if (i < s.length() && s.charAt(i) == ']') {
            i++;
            return l;
        }
        while (true) {
            ws();
            l.add(value(depth + 1));
            ws();
            if (i >= s.length()) {
                throw bad("unterminated array");
            }
            char c = s.charAt(i++);
            if (c == ']') {
                return l;
            }
            if (c != ',') {
                throw bad("want ',' or ']'");
            }
        }
    }
}
