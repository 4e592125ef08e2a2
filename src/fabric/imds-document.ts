/**
 * The instance metadata document the fake IMDS serves by default: the realistic `api-version=2023-11-15&extended=true`
 * response (docs/protocol.md#imds-example-document), plus helpers that derive the variants scenarios need.
 */

export const EXAMPLE_VM_ID = 'd0df4c54-4ecb-4a4b-9954-5bdf3ed5c3b8';

/** A fresh deep copy of the example document, so a test can change it freely. */
export function exampleImdsDocument(): Record<string, any> {
  return structuredClone(EXAMPLE);
}

/** The example document with some osProfile fields replaced. */
export function withOsProfile(changes: Record<string, unknown>): Record<string, any> {
  const doc = exampleImdsDocument();
  Object.assign(doc.compute.osProfile, changes);
  return doc;
}

const EXAMPLE = {
  "compute": {
    "additionalCapabilities": {
      "hibernationEnabled": "false"
    },
    "azEnvironment": "AzurePublicCloud",
    "customData": "",
    "evictionPolicy": "",
    "extendedLocation": {
      "name": "",
      "type": ""
    },
    "host": {
      "id": ""
    },
    "hostGroup": {
      "id": ""
    },
    "isHostCompatibilityLayerVm": "false",
    "isVmInStandbyPool": "",
    "licenseType": "",
    "location": "westeurope",
    "name": "web-01",
    "offer": "ubuntu-24_04-lts",
    "osProfile": {
      "adminUsername": "azureuser",
      "computerName": "web-01",
      "disablePasswordAuthentication": "true"
    },
    "osType": "Linux",
    "placementGroupId": "",
    "plan": {
      "name": "",
      "product": "",
      "publisher": ""
    },
    "platformFaultDomain": "0",
    "platformSubFaultDomain": "",
    "platformUpdateDomain": "0",
    "priority": "",
    "provider": "Microsoft.Compute",
    "publicKeys": [
      {
        "keyData": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIN/Rb85Ri4GtZokp7+G4Wiooo9ItAifFWeNtrUbNH45R azureuser@laptop\n",
        "path": "/home/azureuser/.ssh/authorized_keys"
      }
    ],
    "publisher": "canonical",
    "resourceGroupName": "rg-web",
    "resourceId": "/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/rg-web/providers/Microsoft.Compute/virtualMachines/web-01",
    "securityProfile": {
      "encryptionAtHost": "false",
      "secureBootEnabled": "true",
      "securityType": "TrustedLaunch",
      "virtualTpmEnabled": "true"
    },
    "sku": "server",
    "storageProfile": {
      "dataDisks": [],
      "imageReference": {
        "communityGalleryImageId": "",
        "exactVersion": "24.04.202510010",
        "id": "",
        "offer": "ubuntu-24_04-lts",
        "publisher": "canonical",
        "sharedGalleryImageId": "",
        "sku": "server",
        "version": "latest"
      },
      "osDisk": {
        "caching": "ReadWrite",
        "createOption": "FromImage",
        "diskSizeGB": "30",
        "managedDisk": {
          "id": "/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/rg-web/providers/Microsoft.Compute/disks/web-01_OsDisk_1",
          "storageAccountType": "Premium_LRS"
        },
        "name": "web-01_OsDisk_1",
        "osType": "Linux",
        "writeAcceleratorEnabled": "false"
      },
      "resourceDisk": {
        "size": "76800"
      }
    },
    "subscriptionId": "11111111-2222-3333-4444-555555555555",
    "tags": "env:prod",
    "tagsList": [
      {
        "name": "env",
        "value": "prod"
      }
    ],
    "userData": "",
    "version": "24.04.202510010",
    "virtualMachineScaleSet": {
      "id": ""
    },
    "vmId": "d0df4c54-4ecb-4a4b-9954-5bdf3ed5c3b8",
    "vmScaleSetName": "",
    "vmSize": "Standard_D2ds_v5",
    "zone": "1"
  },
  "network": {
    "interface": [
      {
        "ipv4": {
          "ipAddress": [
            {
              "privateIpAddress": "10.0.0.4",
              "publicIpAddress": ""
            }
          ],
          "subnet": [
            {
              "address": "10.0.0.0",
              "prefix": "24"
            }
          ]
        },
        "ipv6": {
          "ipAddress": []
        },
        "macAddress": "000D3A1B2C3D"
      }
    ]
  },
  "extended": {
    "compute": {
      "hasCustomData": false,
      "ppsType": "None"
    }
  }
};
