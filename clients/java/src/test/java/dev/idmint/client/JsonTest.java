package dev.idmint.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class JsonTest {
    @Test
    void readsIdmintAnswers() {
        Map<String, Object> v = Json.object("{\"key\":\"order\",\"first\":\"3\",\"last\":\"7\",\"count\":5}");
        assertEquals("order", v.get("key"));
        assertEquals(5, ((Json.Num) v.get("count")).longValue());
        v = Json.object(" {\"ids\" : [\"1\", \"2\"], \"ok\":true, \"n\":null, \"e\":{\"a\":[]}} ");
        assertEquals(List.of("1", "2"), v.get("ids"));
        assertEquals(Boolean.TRUE, v.get("ok"));
    }

    @Test
    void escapes() {
        assertEquals("a\"b\\c/\n\u00e9", Json.parse("\"a\\\"b\\\\c\\/\\n\\u00e9\""));
    }

    @Test
    void refusesWhatIsNotJson() {
        for (String bad : new String[] {"", "{", "{\"a\":1", "{\"a\" 1}", "[1,]", "\"abc", "{\"a\":1} x", "tru", "\"\\x\"", "-", "\"\\u12\""}) {
            assertThrows(IllegalArgumentException.class, () -> Json.parse(bad), bad);
        }
    }
}
