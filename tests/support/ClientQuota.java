// Sets or removes the default client quota on produce bytes, through the Admin API of the
// broker's own kafka-clients jar (AlterClientQuotas, KIP-546). kafka-configs.sh's class moved
// to kafka-tools in 4.0, a jar the broker's POM does not resolve; the Admin API is in every
// version. Run as a single source file: java -cp '<broker jars>/*' ClientQuota.java BOOTSTRAP RATE|delete
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;

public class ClientQuota {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        // the default entity of every client id: a null name
        Map<String, String> entity = new java.util.HashMap<>();
        entity.put(ClientQuotaEntity.CLIENT_ID, null);
        Double rate = args[1].equals("delete") ? null : Double.valueOf(args[1]);
        ClientQuotaAlteration alteration = new ClientQuotaAlteration(new ClientQuotaEntity(entity),
                List.of(new ClientQuotaAlteration.Op("producer_byte_rate", rate)));
        try (Admin admin = Admin.create(props)) {
            admin.alterClientQuotas(List.of(alteration)).all().get(30, TimeUnit.SECONDS);
        }
    }
}
