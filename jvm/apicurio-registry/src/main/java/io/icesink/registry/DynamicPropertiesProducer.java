package io.icesink.registry;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import java.util.List;
import javax.enterprise.inject.Produces;
import javax.inject.Singleton;

/**
 * The bean of Apicurio's config-index extension, whose build half Maven Central lacks at the
 * version Apicurio Registry 2.4.2.Final uses (see the pom): the list of the registry's settings
 * editable at run time, empty here, so none is.
 */
public class DynamicPropertiesProducer {
    @Produces
    @Singleton
    DynamicConfigPropertyList dynamicConfigPropertyList() {
        return new DynamicConfigPropertyList(List.of());
    }
}
