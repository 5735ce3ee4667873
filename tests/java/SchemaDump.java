// Prints the wire schema of Kafka's generated message classes, one line per version:
// "<Class> v<version> <field>=<TYPE>,...,TAGS<<tag>:<field>=<TYPE>;...>", arrays as []T (?[] when nullable),
// structs as {...}. tests/metadata/test_metadata_schemas.py renders kafkalog's tables the same way and compares.
import org.apache.kafka.common.protocol.types.ArrayOf;
import org.apache.kafka.common.protocol.types.BoundField;
import org.apache.kafka.common.protocol.types.CompactArrayOf;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.TaggedFields;
import org.apache.kafka.common.protocol.types.Type;

import java.util.Map;
import java.util.TreeMap;

public class SchemaDump {
    static String type(Type t) throws Exception {
        if (t instanceof CompactArrayOf || t instanceof ArrayOf) {
            return (t.isNullable() ? "?[]" : "[]") + type(t.arrayElementType().get());
        }
        if (t instanceof Schema) return "{" + schema((Schema) t) + "}";
        return t.toString();
    }

    @SuppressWarnings("unchecked")
    static String schema(Schema s) throws Exception {
        StringBuilder sb = new StringBuilder();
        for (BoundField f : s.fields()) {
            if (f.def.type instanceof TaggedFields) {
                java.lang.reflect.Field inner = TaggedFields.class.getDeclaredField("fields");
                inner.setAccessible(true);
                Map<Integer, Field> tagged = new TreeMap<>((Map<Integer, Field>) inner.get(f.def.type));
                sb.append("TAGS<");
                for (Map.Entry<Integer, Field> e : tagged.entrySet()) {
                    sb.append(e.getKey()).append(':').append(e.getValue().name).append('=')
                      .append(type(e.getValue().type)).append(';');
                }
                sb.append('>');
            } else {
                sb.append(f.def.name).append('=').append(type(f.def.type)).append(',');
            }
        }
        return sb.toString();
    }

    public static void main(String[] classes) throws Exception {
        for (String name : classes) {
            Class<?> c = Class.forName(name);
            Schema[] schemas = (Schema[]) c.getField("SCHEMAS").get(null);
            short low = c.getField("LOWEST_SUPPORTED_VERSION").getShort(null);
            short high = c.getField("HIGHEST_SUPPORTED_VERSION").getShort(null);
            for (int v = low; v <= high; v++) {
                if (schemas[v] != null) System.out.println(c.getSimpleName() + " v" + v + " " + schema(schemas[v]));
            }
        }
    }
}
