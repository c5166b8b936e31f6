include $(sort $(wildcard $(BR2_EXTERNAL_MARMOSET_PATH)/package/*/*.mk))
