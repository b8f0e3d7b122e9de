//! Devices: ibv_get_device_list, ibv_open_device and the device's sysfs files.


